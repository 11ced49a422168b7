# guest-build.sh - sourced by the QEMU and libvirt tests: build the test
# guest (boot.S, guest.c, guest.ld) into $G/guest.elf with the host
# compiler, as qemu.sh does.  Needs S (source dir) and G (output dir); sets
# GUEST.  Returns 77 with a SKIP line when the compiler cannot build -m32
# freestanding code, 1 on a warning.
guest_build() {
	local cc=${HPZ_GUEST_CC:-gcc} ld=${HPZ_GUEST_LD:-ld}
	local flags=(-m32 -ffreestanding -nostdlib -fno-pie -fno-pic
	    -fno-stack-protector -fno-asynchronous-unwind-tables
	    -mgeneral-regs-only -O2 -Wall -Wextra)

	mkdir -p "$G" || return 1
	if ! "$cc" "${flags[@]}" -c "$S/tests/qemu/boot.S" -o "$G/boot.o" 2>"$G/build.log" ||
	   ! "$cc" "${flags[@]}" -c "$S/tests/qemu/guest.c" -o "$G/guest.o" 2>>"$G/build.log"; then
		cat "$G/build.log"
		echo "SKIP: $cc cannot build -m32 freestanding code"
		return 77
	fi
	if ! "$ld" -m elf_i386 -nostdlib -z max-page-size=0x1000 \
	    -T "$S/tests/qemu/guest.ld" -o "$G/guest.elf" "$G/boot.o" \
	    "$G/guest.o" 2>>"$G/build.log"; then
		cat "$G/build.log"
		echo "SKIP: $ld cannot link an elf_i386 image"
		return 77
	fi
	if [ -s "$G/build.log" ]; then
		echo "FAIL: warnings building the guest:"; cat "$G/build.log"
		return 1
	fi
	GUEST=$G/guest.elf
}
