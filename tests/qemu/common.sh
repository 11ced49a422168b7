# common.sh - sourced by the QEMU and libvirt tests: what they need of the
# host, the test guest's build, the preload library, a daemon counter and
# a guest run's verdict.  Needs S (source dir) and B (build dir).

skip() { echo "SKIP: $*"; exit 77; }

# qemu_setup DIR [FILE...]: the host (qemu_host, FILEs built too) and the
# guest built in DIR, or the script exits as they say; FREE names the free
# 2 MiB page count; tests/hugepages.sh and tests/hpzd.sh sourced.
qemu_setup() {
	local g=$1 rc
	shift
	qemu_host "$@"
	rc=$?
	[ $rc != 0 ] && exit $rc
	FREE=/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages
	G=$g
	guest_build
	rc=$?
	[ $rc != 0 ] && exit $rc
	. "$S/tests/hugepages.sh"
	. "$S/tests/hpzd.sh"
}

# qemu_host [FILE...]: QEMU, timeout(1), root, userfaultfd and 2 MiB huge
# pages, and the build's daemon, hpz-run, hpzctl, preload library and
# FILEs.  Returns 77 with a SKIP line, or 1 with a FAIL line.
qemu_host() {
	local why='' f
	if ! command -v "$QEMU" >/dev/null 2>&1; then
		why="$QEMU not found (Debian: qemu-system-x86)"
	# An instrumented preload cannot go into an uninstrumented QEMU.
	elif grep -q '^SAN_CFLAGS = -fsanitize' "$B/Makefile" 2>/dev/null; then
		why="sanitizer build: the preload cannot be injected into QEMU (the plain build runs this)"
	elif ! command -v timeout >/dev/null 2>&1; then
		why="timeout(1) not found"
	elif [ "$(id -u)" != 0 ]; then
		why="needs root (huge page pool, hugetlbfs mount, userfaultfd)"
	elif [ ! -e /dev/userfaultfd ] && [ ! -e /proc/sys/vm/unprivileged_userfaultfd ]; then
		why="the kernel has no userfaultfd"
	elif [ ! -w /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages ]; then
		why="no 2 MiB huge pages"
	fi
	if [ -n "$why" ]; then
		echo "SKIP: $why"
		return 77
	fi
	for f in daemon/hpzerod client/hpz-run client/hpzctl \
	    client/.libs/libhpz-preload.so "$@"; do
		[ -e "$B/$f" ] || { echo "FAIL: $B/$f not built"; return 1; }
	done
}

# qemu_preload DIR: HPZ_PRELOAD is a copy of the preload library in DIR,
# taken while no install relinks it in place (libtool does, and
# tests/install.sh and tests/libvirt run installs).
qemu_preload() {
	flock "${HPZ_INSTALL_LOCK:-/tmp/hpz-install.lock}" \
	    cp "$B/client/.libs/libhpz-preload.so" "$1/libhpz-preload.so" ||
		{ echo "FAIL: cannot copy the preload library"; return 1; }
	export HPZ_PRELOAD=$1/libhpz-preload.so
}

# qemu_counter NAME: one counter of the daemon on $sock (hpzctl stats --json).
qemu_counter() {
	"$B/client/hpzctl" -s "$sock" stats --json |
	    grep -o "\"$1\" *: *[0-9]*" | grep -o '[0-9]*$'
}

# qemu_why RC OUT WANT: why a guest run that exited RC with serial output
# OUT failed (timeout(1) expired, the guest's code, no WANT line); nothing
# when it did not.
qemu_why() {
	if [ "$1" = 124 ]; then
		echo "QEMU timed out after 120 s"
	elif [ "$1" != 1 ]; then
		echo "QEMU exited $1 (guest code $(( ($1 - 1) / 2 )) if odd; 1 means success)"
	elif ! grep -aqE "$3" "$2"; then
		echo "no '$3' line"
	fi
}

# qemu_verdict NAME WHY ERR OUT PASS-TEXT: a FAIL with QEMU's stderr and
# serial output when WHY says one, else a PASS; counted in passed/failed.
qemu_verdict() {
	if [ -n "$2" ]; then
		echo "FAIL: $1: $2"
		echo "  --- hpz-run and QEMU stderr ---"; sed 's/^/  /' "$3" | tail -20
		echo "  --- serial ---"; tr -d '\r' <"$4" | sed 's/^/  /' | tail -30
		failed=$((failed + 1))
	else
		echo "PASS: $1: $5"
		passed=$((passed + 1))
	fi
}

# guest_build: the test guest (boot.S, guest.c, guest.ld) built into
# $G/guest.elf with the host compiler; sets GUEST.  Returns 77 with a SKIP
# line when the compiler cannot build -m32 freestanding code, 1 on a
# warning.
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
