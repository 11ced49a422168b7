#!/bin/bash
# vmm.sh - what a VM host does besides booting, with QEMU (TCG) under
# hpz-run and a hpzerod of our own:
#
#   postcopy-into-hpz   local postcopy migration (unix socket, QMP, precopy
#                       slowed with max-bandwidth so the switch happens):
#                       plain QEMU -> QEMU under hpz-run -f discard, whose
#                       RAM is a hugetlbfs file still holding the last
#                       guest's bytes; hpz-run must hand the range to
#                       QEMU's own userfaultfd and take it back after
#   postcopy-from-hpz   QEMU under hpz-run -> plain QEMU
#   snapshot            background snapshot of a QEMU under hpz-run (its
#                       WP probe and its real WP registration); the guest
#                       keeps running, and the snapshot loads in a plain
#                       QEMU with the right bytes
#   balloon-*           virtio-balloon driven by QMP balloon: the guest
#                       gives pages back (hugetlb: PUNCH_HOLE; shmem: PUNCH
#                       and DONTNEED) and takes them again
#   served-after        hpzerod still serves a new guest after all that
#
# The guest (guest.c, "wait" and "balloon" modes) writes a pattern to half
# of its RAM, checks it after, and checks that the half it never wrote
# reads zero.  Exit 77 (skip) when the machine cannot run QEMU.
set -u
: "${HPZ_SRCDIR:?run from make check}" "${HPZ_BUILDDIR:?run from make check}"
S=$HPZ_SRCDIR
B=$HPZ_BUILDDIR
QEMU=${HPZ_QEMU:-qemu-system-x86_64}
MEM_MB=256
BOUND=120		# seconds: "did not hang", not a timing claim

. "$S/tests/qemu/common.sh"
qemu_setup "$B/tests/qemu/vmm" tests/qemu/qmp
command -v mkfifo >/dev/null 2>&1 || skip "mkfifo(1) not found"
# TCG keeps a CPU busy for the whole run: not beside the integration suite
# and the soak, whose liveness bounds assume the machine to themselves.
hp_alone
dir=$(mktemp -d /tmp/hpz-vmm.XXXXXX)
pids=() dpid='' mnt=''
# shellcheck disable=SC2317  # called by the trap
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	[ -n "$dpid" ] && kill "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null
	[ -n "$mnt" ] && umount "$mnt" 2>/dev/null
	hp_release
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Two guests at once during a migration (one of them may be the recycled
# file), and slack.
hp_reserve_2m $((MEM_MB / 2 * 2 + 32))
if [ "$(cat "$FREE")" -lt "$MEM_MB" ]; then
	skip "only $(cat "$FREE") free 2 MiB huge pages, $MEM_MB needed"
fi
mnt=$dir/hugetlbfs
mkdir "$mnt"
if ! mount -t hugetlbfs -o pagesize=2M none "$mnt" 2>"$dir/mount.err"; then
	mnt=''
	skip "cannot mount hugetlbfs: $(cat "$dir/mount.err")"
fi

sock=$dir/hpzerod.sock
"$B/daemon/hpzerod" --socket "$sock" --workers 2 --pool off 2>"$dir/hpzerod.log" 8>&- &
dpid=$!
hpzd_wait_socket "$sock" "$dir/hpzerod.log" || exit 1
qemu_preload "$dir" || exit 1
unset HPZ_RUN_FLAGS HPZ_RUN_MIN HPZ_RUN_NAME HPZ_RUN_EXCLUDE HPZ_RUN_FILE

MEMFD="memory-backend-memfd,id=m,size=${MEM_MB}M,hugetlb=on,hugetlbsize=2M,share=on"
SHMEM="memory-backend-memfd,id=m,size=${MEM_MB}M,share=on"
FILE="memory-backend-file,id=m,size=${MEM_MB}M,mem-path=$mnt/vm,share=on"

qmp() { "$B/tests/qemu/qmp" "$@"; }
counter() { qemu_counter "$1"; }
# A guest's serial port: NAME.in to write to it, NAME.log what it wrote.
serial() {
	rm -f "$dir/$1.in" "$dir/$1.out" "$dir/$1.log"
	mkfifo "$dir/$1.in" "$dir/$1.out" || return 1
	cat "$dir/$1.out" >"$dir/$1.log" 8>&- &
	pids+=($!)
}
# guest_line NAME: the guest's lines, without the firmware's escapes.
guest_lines() { tr -d '\r' <"$dir/$1.log" | grep -a '^guest:'; }
# wait_line NAME REGEX: until the guest printed it (BOUND seconds).
wait_line() {
	local i
	for i in $(seq $((BOUND * 10))); do
		guest_lines "$1" | grep -qE "$2" && return 0
		sleep 0.1
	done
	return 1
}
# vm NAME WRAP BACKEND MODE [QEMU args...]: start a QEMU; its pid in VM.
# WRAP: plain, or hpz-run options ("-f discard", or "-" for none).
vm() {
	local name=$1 wrap=$2 backend=$3 mode=$4 pre=()
	shift 4
	[ "$wrap" != plain ] && pre=("$B/client/hpz-run" -v -s "$sock")
	[ "$wrap" != plain ] && [ "$wrap" != - ] && pre+=($wrap)
	[ "$wrap" != plain ] && pre+=(--)
	serial "$name" || return 1
	rm -f "$dir/$name.qmp"
	timeout $BOUND "${pre[@]}" "$QEMU" -accel tcg -m $MEM_MB \
	    -object "$backend" -machine pc,memory-backend=m \
	    -kernel "$GUEST" -append "$mode" -nographic -nic none \
	    -monitor none -serial "pipe:$dir/$name" \
	    -qmp "unix:$dir/$name.qmp,server=on,wait=off" \
	    -device isa-debug-exit,iobase=0xf4,iosize=4 "$@" \
	    </dev/null >/dev/null 2>"$dir/$name.err" 8>&- &
	VM=$!
	pids+=($VM)
}
# status NAME: the migration status QMP reports.
status() {
	qmp "$dir/$1.qmp" '{"execute":"query-migrate"}' 2>/dev/null |
	    grep -o '"status":"[a-z-]*"' | head -1 | cut -d'"' -f4
}
# watch NAME: poll the status until it ends; the statuses seen in SEEN.
watch() {
	local st i
	SEEN=
	for i in $(seq $((BOUND * 20))); do
		st=$(status "$1")
		case " $SEEN " in *" $st "*) ;; *) SEEN="$SEEN $st" ;; esac
		case "$st" in completed|failed|cancelled|postcopy-paused) return 0 ;; esac
		sleep 0.05
	done
	return 1
}
# finish PID: wait for a QEMU; its status in RC.
finish() { wait "$1"; RC=$?; }

passed=0 failed=0
WHY=
pass() { echo "PASS: $1${2:+: $2}"; passed=$((passed + 1)); }
fail() {
	local n
	echo "FAIL: $1: $WHY"
	shift
	for n in "$@"; do
		echo "  --- $n: stderr ---"; sed 's/^/  /' "$dir/$n.err" | tail -15
		echo "  --- $n: guest ---"; guest_lines "$n" | sed 's/^/  /' | tail -8
	done
	failed=$((failed + 1))
}
# The wait-mode guest's verdict after the byte: pattern kept, rest zero.
WAIT_OK='^guest: after the wait: [1-9][0-9]* pages, 0 words without the pattern; [1-9][0-9]* pages never written, 0 non-zero words$'
# handed NAME: how many times hpz-run handed a range over / took it back.
handed() { grep -c 'handed .* over to the program.s userfaultfd' "$dir/$1.err"; }
taken() { grep -c 'took .* back from the program.s userfaultfd' "$dir/$1.err"; }

# The last guest's RAM in a hugetlbfs file: a plain QEMU fills it.
recycle_file() {
	rm -f "$mnt/vm"
	vm fill plain "$FILE" check
	finish $VM
	[ $RC = 1 ] && guest_lines fill | grep -q 'pattern ok'
}

CAPS='{"execute":"migrate-set-capabilities","arguments":{"capabilities":[{"capability":"postcopy-ram","state":true}]}}'
# The source also reports each status change (MIGRATION events): polling
# can miss a postcopy phase shorter than its interval.
SRCCAPS='{"execute":"migrate-set-capabilities","arguments":{"capabilities":[{"capability":"postcopy-ram","state":true},{"capability":"events","state":true}]}}'
# postcopy NAME SRCWRAP SRCBACKEND DSTWRAP DSTBACKEND
postcopy() {
	local name=$1 s d src=$1-src dst=$1-dst
	WHY=
	vm "$dst" "$4" "$5" wait -incoming defer; d=$VM
	vm "$src" "$2" "$3" wait; s=$VM
	if ! qmp -w 30 "$dir/$dst.qmp" "$CAPS" \
	    "{\"execute\":\"migrate-incoming\",\"arguments\":{\"uri\":\"unix:$dir/$name.sock\"}}" >/dev/null; then
		WHY="the destination refused to listen"
	elif ! wait_line "$src" 'waiting for a byte'; then
		WHY="the source guest never filled its RAM"
	# 8 MiB/s: the first pass alone would take 30 s, so the switch comes
	# while precopy still has most of the RAM to send.
	elif ! timeout $BOUND "$B/tests/qemu/qmp" -w 30 -e MIGRATION \
	    "$dir/$src.qmp" "$SRCCAPS" \
	    '{"execute":"migrate-set-parameters","arguments":{"max-bandwidth":8388608}}' \
	    "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"unix:$dir/$name.sock\"}}" \
	    "sleep 1" '{"execute":"migrate-start-postcopy"}' \
	    >"$dir/$name.events" 2>"$dir/$name.qmperr"; then
		WHY="the migration did not run to its end: $(cat "$dir/$name.qmperr")"
	fi
	SEEN=$(awk '$1 == "MIGRATION" { printf " %s", $2 }' "$dir/$name.events")
	[ -n "$WHY" ] && WHY="$WHY (statuses:$SEEN)"
	if [ -z "$WHY" ]; then
		case "$SEEN" in
		*postcopy-active*completed) ;;
		*) WHY="statuses:$SEEN (want postcopy-active, then completed)" ;;
		esac
	fi
	# Wake the guest on the destination: it checks its RAM and exits.
	[ -z "$WHY" ] && printf g >"$dir/$dst.in"
	[ -z "$WHY" ] && finish $d
	[ -n "$WHY" ] && kill $d 2>/dev/null && finish $d
	qmp "$dir/$src.qmp" '{"execute":"quit"}' >/dev/null 2>&1 || kill $s 2>/dev/null
	wait $s 2>/dev/null
	if [ -z "$WHY" ] && [ $RC != 1 ]; then
		WHY="the destination QEMU exited $RC (1: the guest was happy)"
	elif [ -z "$WHY" ] && ! guest_lines "$dst" | grep -qE "$WAIT_OK"; then
		WHY="the destination guest did not find its pattern and zeros"
	elif [ -z "$WHY" ] && [ "$4" != plain ] &&
	    { [ "$(handed "$dst")" -lt 1 ] || [ "$(taken "$dst")" -lt 1 ]; }; then
		WHY="hpz-run did not hand the range over and take it back"
	elif [ -z "$WHY" ] && ! kill -0 "$dpid" 2>/dev/null; then
		WHY="hpzerod died"
	fi
	if [ -n "$WHY" ]; then
		fail "$name" "$src" "$dst"
	else
		pass "$name" "statuses$SEEN; $(guest_lines "$dst" | grep -o '[0-9]* pages never written')"
	fi
}

# snapshot: background snapshot of an hpz-run guest, then loaded.
snapshot() {
	local name=snapshot s d st
	WHY=
	vm "$name" - "$MEMFD" wait; s=$VM
	if ! wait_line "$name" 'waiting for a byte'; then
		WHY="the guest never filled its RAM"
	elif ! qmp -w 30 "$dir/$name.qmp" \
	    '{"execute":"migrate-set-capabilities","arguments":{"capabilities":[{"capability":"background-snapshot","state":true}]}}' \
	    "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"exec:cat > $dir/snap\"}}" >/dev/null; then
		WHY="QEMU refused the background snapshot"
	elif ! watch "$name"; then
		WHY="the snapshot did not end in $BOUND s (statuses:$SEEN)"
	elif [ "${SEEN##* }" != completed ]; then
		WHY="statuses:$SEEN (want completed)"
	fi
	if [ -z "$WHY" ]; then
		st=$(qmp "$dir/$name.qmp" '{"execute":"query-status"}')
		case "$st" in
		*'"status":"running"'*) ;;
		*) WHY="the guest is not running after the snapshot: $st" ;;
		esac
	fi
	[ -z "$WHY" ] && printf g >"$dir/$name.in"
	[ -n "$WHY" ] && kill $s 2>/dev/null
	finish $s
	if [ -z "$WHY" ] && { [ $RC != 1 ] ||
	    ! guest_lines "$name" | grep -qE "$WAIT_OK"; }; then
		WHY="after the snapshot the guest did not find its pattern and zeros (QEMU exited $RC)"
	elif [ -z "$WHY" ] && { [ "$(handed "$name")" -lt 2 ] ||
	    [ "$(taken "$name")" -lt 2 ]; }; then
		WHY="hpz-run handed over $(handed "$name") and took back $(taken "$name") times (want the probe and the snapshot: 2 each)"
	fi
	if [ -n "$WHY" ]; then
		fail "$name" "$name"
		return
	fi
	# The snapshot, loaded in a plain QEMU, has the guest's bytes.
	vm "$name-load" plain "$MEMFD" wait -incoming "exec:cat $dir/snap"; d=$VM
	for _ in $(seq $((BOUND * 10))); do
		st=$(qmp -w 30 "$dir/$name-load.qmp" '{"execute":"query-status"}' 2>/dev/null)
		case "$st" in *'"status":"running"'*) break ;; esac
		sleep 0.1
	done
	printf g >"$dir/$name-load.in"
	finish $d
	if [ $RC != 1 ] || ! guest_lines "$name-load" | grep -qE "$WAIT_OK"; then
		WHY="the loaded snapshot's guest did not find its pattern and zeros (QEMU exited $RC)"
		fail "$name" "$name-load"
	else
		pass "$name" "statuses$SEEN; guest ran on; loaded: pattern and zeros"
	fi
}

BALLOON_OK='^guest: after the balloon: 0 non-zero words given back, 0 words without the pattern, 0 non-zero words never written$'
# balloon NAME WRAP BACKEND
balloon() {
	local name=$1 v full=$((MEM_MB << 20)) want a
	local target=$(( (MEM_MB - 16) << 20 ))	# the guest gives 16 MiB
	WHY=
	vm "$name" "$2" "$3" balloon -device virtio-balloon-pci,disable-modern=on
	v=$VM
	if ! wait_line "$name" 'waiting for the host to ask'; then
		WHY="the guest found no balloon"
	elif ! qmp -w 30 "$dir/$name.qmp" \
	    "{\"execute\":\"balloon\",\"arguments\":{\"value\":$target}}" >/dev/null; then
		WHY="QMP balloon refused"
	elif ! wait_line "$name" 'gave back'; then
		WHY="the guest did not inflate"
	fi
	if [ -z "$WHY" ]; then
		# The device has the pages: QEMU counts them out of the guest.
		want="{\"actual\":$target}"
		for _ in $(seq 100); do
			a=$(qmp "$dir/$name.qmp" '{"execute":"query-balloon"}')
			[ "$a" = "$want" ] && break
			sleep 0.1
		done
		[ "$a" = "$want" ] || WHY="query-balloon says $a, want $want"
	fi
	[ -z "$WHY" ] && { qmp "$dir/$name.qmp" \
	    "{\"execute\":\"balloon\",\"arguments\":{\"value\":$full}}" >/dev/null ||
	    WHY="QMP balloon (deflate) refused"; }
	[ -n "$WHY" ] && kill $v 2>/dev/null
	finish $v
	if [ -z "$WHY" ] && [ $RC != 1 ]; then
		WHY="QEMU exited $RC (13: a page given back kept old bytes)"
	elif [ -z "$WHY" ] && ! guest_lines "$name" | grep -qE "$BALLOON_OK"; then
		WHY="the guest did not find zeros where it gave pages back, its pattern elsewhere"
	elif [ -z "$WHY" ] && ! grep -q 'registered' "$dir/$name.err"; then
		WHY="hpz-run registered nothing"
	fi
	if [ -n "$WHY" ]; then
		fail "$name" "$name"
	else
		pass "$name" "16 MiB given back, read zero after; pattern kept elsewhere"
	fi
}

# The recycled file's pages count against what we reserved: at most one
# file and two guests at a time.
if recycle_file; then
	postcopy postcopy-into-hpz plain "$MEMFD" "-f discard" "$FILE"
else
	WHY="a plain QEMU could not fill the hugetlbfs file"; fail recycle fill
fi
rm -f "$mnt/vm"
postcopy postcopy-from-hpz - "$MEMFD" plain "$MEMFD"
snapshot
balloon balloon-memfd - "$MEMFD"
if recycle_file; then
	balloon balloon-recycled-discard "-f discard" "$FILE"
else
	WHY="a plain QEMU could not fill the hugetlbfs file"; fail recycle fill
fi
rm -f "$mnt/vm"
balloon balloon-shmem - "$SHMEM"

# served-after: a fresh guest under hpz-run is still registered after all
# that, and its RAM (no garbage) left to the kernel.
r0=$(counter registers) o0=$(counter intercept_off)
vm served-after - "$MEMFD" touch
finish $VM
r1=$(counter registers) o1=$(counter intercept_off)
WHY=
if [ $RC != 1 ] || ! guest_lines served-after | grep -qE '^guest: touched [1-9][0-9]* pages, 0 non-zero words'; then
	WHY="QEMU exited $RC without its 'touched' line"
elif [ -z "$r0" ] || [ -z "$r1" ] || [ "$r1" -le "$r0" ]; then
	WHY="hpz-run registered nothing (registers ${r0:-?} -> ${r1:-?})"
elif [ -z "$o0" ] || [ -z "$o1" ] || [ "$o1" -le "$o0" ]; then
	WHY="hpzerod never left the fresh RAM to the kernel (intercept_off ${o0:-?} -> ${o1:-?})"
fi
if [ -n "$WHY" ]; then fail served-after served-after
else pass served-after "registered, left to the kernel"; fi

hpzd_stop "$dpid" FAIL: || failed=$((failed + 1))
dpid=
hpzd_errors "$dir/hpzerod.log"
echo "vmm: $passed passed, $failed failed"
[ $failed -ne 0 ] && exit 1
exit 0
