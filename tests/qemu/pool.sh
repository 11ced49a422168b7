#!/bin/bash
# pool.sh - QEMU under hpz-run with hpzerod's pre-zeroed pool: the guest RAM
# of memory-backend-memfd (hugetlb, sealed as QEMU seals it by default)
# becomes a pool file, lazily touched and with prealloc=on, and with
# -f premap; the guest (qemu.sh's) checks that every word of its RAM reads
# zero on first touch and keeps a pattern.  The daemon's counters must show
# the hand-out, and -f nopool must take none.  Exit 77 (skip) when the
# machine cannot run it.
set -u
: "${HPZ_SRCDIR:?run from make check}" "${HPZ_BUILDDIR:?run from make check}"
S=$HPZ_SRCDIR
B=$HPZ_BUILDDIR
QEMU=${HPZ_QEMU:-qemu-system-x86_64}
MEM_MB=256
POOL_MB=$((MEM_MB - 64))	# the rest of the RAM is fresh memory
PAGES=$((POOL_MB / 2 + MEM_MB / 2 + 16 + 16))	# pool, a guest, reserve, slack

. "$S/tests/qemu/common.sh"
# The guest, as qemu.sh builds it, in a directory of its own: make -j
# check runs qemu.sh beside this.
qemu_setup "$B/tests/qemu/pool"
# QEMU under TCG beside the integration suite or the soak would make their
# liveness bounds meaningless; and their daemons' pools are off, ours is on.
hp_alone
dir=$(mktemp -d /tmp/hpz-qpool.XXXXXX)
pid='' qpid=''
# shellcheck disable=SC2317  # called by the trap
cleanup() {
	[ -n "$qpid" ] && kill "$qpid" 2>/dev/null && wait "$qpid" 2>/dev/null
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	hp_release
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

hp_reserve_2m "$PAGES"
if [ "$(cat "$FREE")" -lt $((PAGES - 16)) ]; then
	skip "only $(cat "$FREE") free 2 MiB huge pages, $((PAGES - 16)) needed"
fi

sock=$dir/hpzerod.sock
cat >"$dir/hpzerod.conf" <<EOF
[pool]
size_2m = ${POOL_MB}M
reserve_2m = 16M
; every guest here runs as root, one uid: what hpzerod.conf(5) says to set
uid_share = 0
; not the machine's free 1 GiB pages (the default, all)
size_1g = 0
EOF
"$B/daemon/hpzerod" --config "$dir/hpzerod.conf" --socket "$sock" \
    --workers 2 2>"$dir/hpzerod.log" 8>&- &
pid=$!
hpzd_wait_socket "$sock" "$dir/hpzerod.log" || exit 1
export HPZ_PRELOAD=$B/client/.libs/libhpz-preload.so
unset HPZ_RUN_FLAGS HPZ_RUN_MIN HPZ_NO_POOL

# One counter of the 2 MiB pool from hpzctl stats --json.
pool_counter() {
	"$B/client/hpzctl" -s "$sock" stats --json |
	    awk -v k="\"$1\"" '/"pools"/ { p = 1 } p && index($0, k) {
		gsub(/[^0-9]/, "", $NF); print $NF; exit }'
}

# Wait (a liveness bound) until the pool holds all its pages again.
pool_full() {
	local i r
	for i in $(seq 200); do
		r=$(pool_counter ready_pages)
		[ "${r:-0}" -ge $((POOL_MB / 2)) ] && return 0
		sleep 0.05
	done
	echo "FAIL: the pool holds ${r:-?} pages after 10 s, not $((POOL_MB / 2))"
	return 1
}

passed=0 failed=0
# run_case NAME FLAGS BACKEND-SUFFIX WANT-HANDOUT
run_case() {
	local name=$1 flags=$2 suffix=$3 want=$4 h0 h1 rc why=''
	local out=$dir/$name.out err=$dir/$name.err
	if ! pool_full; then
		failed=$((failed + 1)); return
	fi
	h0=$(pool_counter handouts)
	timeout 120 "$B/client/hpz-run" -v -s "$sock" ${flags:+-f "$flags"} -- \
	    "$QEMU" -accel tcg -m $MEM_MB \
	    -object "memory-backend-memfd,id=m,size=${MEM_MB}M,hugetlb=on,hugetlbsize=2M,share=on$suffix" \
	    -machine pc,memory-backend=m -kernel "$GUEST" \
	    -nographic -nic none -serial stdio -monitor none \
	    -device isa-debug-exit,iobase=0xf4,iosize=4 \
	    </dev/null >"$out" 2>"$err" 8>&- &
	qpid=$!
	wait $qpid
	rc=$?
	qpid=
	h1=$(pool_counter handouts)
	grep -a '^guest:' "$out" | tr -d '\r' | sed "s/^/  $name: /"
	why=$(qemu_why $rc "$out" '^guest: checked [1-9][0-9]* pages, 0 non-zero words, pattern ok')
	if [ -n "$why" ]; then
		:
	elif [ "$want" = yes ] && [ "$((h1 - h0))" != 1 ]; then
		why="no pool file handed out (handouts $h0 -> $h1)"
	elif [ "$want" = yes ] && ! grep -q "memfd 'memory-backend-memfd' (fd [0-9]*): a pool file" "$err"; then
		why="hpz-run did not swap the pool file in"
	elif [ "$want" = no ] && [ "$h1" != "$h0" ]; then
		why="a pool file was handed out (handouts $h0 -> $h1)"
	elif ! kill -0 "$pid" 2>/dev/null; then
		why="hpzerod died"
	fi
	qemu_verdict "$name" "$why" "$err" "$out" "pool handouts $h0 -> $h1"
}

# QEMU seals its memfd by default (F_SEAL_GROW|F_SEAL_SHRINK|F_SEAL_SEAL);
# a refused seal would stop it before the guest runs.
run_case pool-lazy '' '' yes
run_case pool-prealloc '' ',prealloc=on' yes
run_case pool-premap premap '' yes
run_case pool-unsealed '' ',seal=off' yes
run_case nopool nopool '' no

# A mixed host: the pool follows the host (size_2m = all) and keeps a
# reserve of one guest's memory; a QEMU without hpz-run maps its RAM
# (hugetlb reserves it all at mmap) while the pool holds every other free
# page, and must start; the pool then gives back to its reserve again.
# run_plain NAME MB: plain QEMU, prealloc=on, timed from start to exit.
run_plain() {
	local name=$1 mb=$2 rc why='' t0 t1
	local out=$dir/$name.out err=$dir/$name.err
	t0=$(date +%s%N)
	timeout 120 "$QEMU" -accel tcg -m "$mb" \
	    -object "memory-backend-memfd,id=m,size=${mb}M,hugetlb=on,hugetlbsize=2M,share=on,prealloc=on" \
	    -machine pc,memory-backend=m -kernel "$GUEST" \
	    -nographic -nic none -serial stdio -monitor none \
	    -device isa-debug-exit,iobase=0xf4,iosize=4 \
	    </dev/null >"$out" 2>"$err" 8>&- &
	qpid=$!
	wait $qpid
	rc=$?
	qpid=
	t1=$(date +%s%N)
	why=$(qemu_why $rc "$out" '^guest: checked [1-9][0-9]* pages, 0 non-zero words, pattern ok')
	qemu_verdict "$name" "$why" "$err" "$out" \
	    "ran in $(( (t1 - t0) / 1000000 )) ms (pool $(pool_counter ready_pages) pages, host $(cat "$FREE") free after)"
}
run_plain plain-beside-a-192M-pool $MEM_MB
printf '[pool]\nreserve_2m = %sM\nsize_1g = 0\nuid_share = 0\n' "$MEM_MB" \
    >"$dir/hpzerod.conf"
kill -HUP "$pid"
# The pool takes every free page above the reserve (a liveness bound).
for i in $(seq 200); do
	[ "$(pool_counter ready_pages)" -gt $((POOL_MB / 2)) ] &&
	    [ "$(cat "$FREE")" -le $((MEM_MB / 2 + 8)) ] && break
	sleep 0.05
done
echo "  mixed host: the pool holds $(pool_counter ready_pages) pages, the host $(cat "$FREE") free (reserve $((MEM_MB / 2)))"
run_plain plain-beside-a-full-pool $MEM_MB
run_plain plain-again-after-the-yield $MEM_MB

hpzd_stop "$pid" FAIL: || failed=$((failed + 1))
pid=
hpzd_errors "$dir/hpzerod.log"
echo "qemu pool: $passed passed, $failed failed"
[ $failed -ne 0 ] && exit 1
exit 0
