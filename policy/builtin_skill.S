/* The project's SKILL.md, embedded so the built-in policy is identical to it. */
	.section .rodata
	.global builtin_skill_md
	.global builtin_skill_md_len
builtin_skill_md:
	.incbin "SKILL.md"
	.byte 0
	.balign 8
builtin_skill_md_len:
	.quad builtin_skill_md_len - builtin_skill_md - 1
	.section .note.GNU-stack,"",@progbits
