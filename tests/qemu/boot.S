/*
 * boot.S - multiboot (v1) header and entry of the qemu.sh test guest.
 * The loader enters in 32-bit protected mode, paging off, with the magic
 * in %eax and the multiboot information's address in %ebx.
 */
#define MB_MAGIC	0x1BADB002
#define MB_FLAGS	0x00000003	/* page-aligned modules, memory info */

	.section .multiboot, "a"
	.balign 4
	.long	MB_MAGIC
	.long	MB_FLAGS
	.long	-(MB_MAGIC + MB_FLAGS)

	.text
	.globl	_start
	.type	_start, @function
_start:
	cli
	cld
	movl	$stack_top, %esp
	xorl	%ebp, %ebp
	pushl	%ebx			/* guest_main(magic, mbi) */
	pushl	%eax
	call	guest_main
1:	hlt				/* guest_main does not return */
	jmp	1b

	.bss
	.balign 16
stack_bottom:
	.skip	16384
stack_top:

	.section .note.GNU-stack, "", @progbits
