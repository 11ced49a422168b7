#!/bin/bash
# qemu.sh - a real VM monitor under hpz-run: QEMU (TCG) boots a small
# multiboot guest whose RAM is a 2 MiB hugetlb memfd, or a file on a
# temporary hugetlbfs mount; hpz-run registers it with a hpzerod of our own.
# The guest checks that its RAM reads zero on first touch and keeps a
# pattern, and says so through isa-debug-exit; hpzerod's counters must show
# that it registered the RAM and left its faults to the kernel (fresh RAM
# holds no garbage: a round trip through hpzerod would only slow it).  Exit 77 (skip) when the machine cannot run it.
set -u
: "${HPZ_SRCDIR:?run from make check}" "${HPZ_BUILDDIR:?run from make check}"
S=$HPZ_SRCDIR
B=$HPZ_BUILDDIR
QEMU=${HPZ_QEMU:-qemu-system-x86_64}
MEM_MB=256
PAGES=$((MEM_MB / 2 + 16))	# 2 MiB pages for one guest, and slack

. "$S/tests/qemu/common.sh"
# The guest: a 32-bit multiboot ELF, built with the host compiler.
qemu_setup "$B/tests/qemu"
dir=$(mktemp -d /tmp/hpz-qemu.XXXXXX)
pid='' qpid='' mnt=''
# shellcheck disable=SC2317  # called by the trap
cleanup() {
	[ -n "$qpid" ] && kill "$qpid" 2>/dev/null && wait "$qpid" 2>/dev/null
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	[ -n "$mnt" ] && umount "$mnt" 2>/dev/null
	hp_release
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

hp_reserve_2m "$PAGES"
if [ "$(cat "$FREE")" -lt $((MEM_MB / 2)) ]; then
	skip "only $(cat "$FREE") free 2 MiB huge pages, $((MEM_MB / 2)) needed"
fi

sock=$dir/hpzerod.sock
"$B/daemon/hpzerod" --socket "$sock" --workers 2 --pool off 2>"$dir/hpzerod.log" &
pid=$!
hpzd_wait_socket "$sock" "$dir/hpzerod.log" || exit 1
qemu_preload "$dir" || exit 1
# hpz-run defaults only: no flags, 64 MiB minimum.
unset HPZ_RUN_FLAGS HPZ_RUN_MIN

counter() { qemu_counter "$1"; }

passed=0 failed=0 skipped=0
# run_case NAME BACKEND-OBJECT [ACCEL [APPEND]]
run_case() {
	local name=$1 backend=$2 accel=${3:-tcg} append=${4:-}
	local out=$dir/$1.out err=$dir/$1.err want
	local f0 r0 f1 r1 o0 o1 rc t0 t1 why=
	want='^guest: checked [1-9][0-9]* pages, 0 non-zero words, pattern ok'
	[ "$append" = touch ] &&
		want='^guest: touched [1-9][0-9]* pages, 0 non-zero words'
	f0=$(counter faults) r0=$(counter registers) o0=$(counter intercept_off)
	if [ -z "$f0" ] || [ -z "$r0" ] || [ -z "$o0" ]; then
		echo "FAIL: $name: hpzctl stats --json gave no counters"
		failed=$((failed + 1)); return
	fi
	t0=$(date +%s.%N)
	timeout 120 "$B/client/hpz-run" -v -s "$sock" -- "$QEMU" \
	    -accel "$accel" -m $MEM_MB -object "$backend" \
	    -machine pc,memory-backend=m -kernel "$G/guest.elf" \
	    ${append:+-append "$append"} \
	    -nographic -nic none -serial stdio -monitor none \
	    -device isa-debug-exit,iobase=0xf4,iosize=4 \
	    </dev/null >"$out" 2>"$err" &
	qpid=$!
	wait $qpid
	rc=$?
	qpid=
	t1=$(date +%s.%N)
	f1=$(counter faults) r1=$(counter registers) o1=$(counter intercept_off)
	# The guest's lines, without the firmware's escape sequences.
	grep -a '^guest:' "$out" | tr -d '\r' | sed "s/^/  $name: /"
	why=$(qemu_why $rc "$out" "$want")
	if [ -n "$why" ]; then
		:
	elif [ -z "$r1" ] || [ "$r1" -le "$r0" ]; then
		why="hpz-run registered nothing (registers $r0 -> ${r1:-?})"
	elif [ -z "$o1" ] || [ "$o1" -le "$o0" ]; then
		why="hpzerod never left the RAM to the kernel (intercept_off $o0 -> ${o1:-?})"
	elif [ -z "$f1" ] || [ "$f1" != "$f0" ]; then
		why="hpzerod served faults of fresh RAM (faults $f0 -> ${f1:-?}): they are the kernel's"
	elif ! kill -0 "$pid" 2>/dev/null; then
		why="hpzerod died"
	fi
	qemu_verdict "$name" "$why" "$err" "$out" \
	    "left to the kernel ($((f1 - f0)) faults served), $((r1 - r0)) registration(s), $(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }") s"
}

run_case memfd-hugetlb \
    "memory-backend-memfd,id=m,size=${MEM_MB}M,hugetlb=on,hugetlbsize=2M,share=on"

mnt=$dir/hugetlbfs
mkdir "$mnt"
if mount -t hugetlbfs -o pagesize=2M none "$mnt" 2>"$dir/mount.err"; then
	run_case hugetlbfs-file \
	    "memory-backend-file,id=m,size=${MEM_MB}M,mem-path=$mnt,share=on"
	umount "$mnt" && mnt=
else
	echo "SKIP: hugetlbfs-file: cannot mount hugetlbfs: $(cat "$dir/mount.err")"
	mnt='' skipped=$((skipped + 1))
fi

# KVM, where it runs: this machine's KVM is slow (a paravirtual one), so the
# guest only reads one word a page.  Plain KVM must work first, or skip.
memfd="memory-backend-memfd,id=m,size=${MEM_MB}M,hugetlb=on,hugetlbsize=2M,share=on"
if [ -c /dev/kvm ] && [ -w /dev/kvm ]; then
	if timeout 60 "$QEMU" -accel kvm -m $MEM_MB -object "$memfd" \
	    -machine pc,memory-backend=m -kernel "$G/guest.elf" -append touch \
	    -nographic -nic none -serial stdio -monitor none \
	    -device isa-debug-exit,iobase=0xf4,iosize=4 </dev/null \
	    >"$dir/kvm-probe.out" 2>&1; [ $? = 1 ]; then
		run_case memfd-hugetlb-kvm "$memfd" kvm touch
	else
		echo "SKIP: memfd-hugetlb-kvm: plain QEMU with KVM did not run" \
		    "the guest within 60 s here"
		skipped=$((skipped + 1))
	fi
else
	echo "SKIP: memfd-hugetlb-kvm: no usable /dev/kvm"
	skipped=$((skipped + 1))
fi

# A clean stop, as in tests/integration/run.sh.
hpzd_stop "$pid" FAIL: || failed=$((failed + 1))
pid=
hpzd_errors "$dir/hpzerod.log"
echo "qemu: $passed passed, $failed failed, $skipped skipped"
[ $failed -ne 0 ] && exit 1
[ $passed -eq 0 ] && exit 77
exit 0
