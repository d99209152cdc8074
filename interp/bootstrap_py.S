/* interp/bootstrap.py, embedded so the binary is self-contained. */
	.section .rodata
	.global bootstrap_py
	.global bootstrap_py_len
bootstrap_py:
	.incbin "interp/bootstrap.py"
	.byte 0
	.balign 8
bootstrap_py_len:
	.quad bootstrap_py_len - bootstrap_py - 1
	.section .note.GNU-stack,"",@progbits
