/* The bootstrap (_psm), embedded so the binary is self-contained: its
 * parts, one concern each, joined in this order into one text that is
 * compiled once as one module (interp/pyembed.c).  The order is the
 * module's: a part may use at import what the parts before it define.
 * A new part is named here (the Makefile rebuilds on any of them). */
	.section .rodata
	.global bootstrap_py
	.global bootstrap_py_len
bootstrap_py:
	.incbin "interp/bootstrap/zygote.py"
	.incbin "interp/bootstrap/warmup.py"
	.incbin "interp/bootstrap/session.py"
	.incbin "interp/bootstrap/cells.py"
	.incbin "interp/bootstrap/refusals.py"
	.incbin "interp/bootstrap/figures.py"
	.incbin "interp/bootstrap/saved.py"
	.incbin "interp/bootstrap/semlock.py"
	.byte 0
	.balign 8
bootstrap_py_len:
	.quad bootstrap_py_len - bootstrap_py - 1
	.section .note.GNU-stack,"",@progbits
