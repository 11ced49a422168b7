#!/bin/bash
# pool-fill.sh - a figure, not a test: how fast the pool refills (2 MiB
# pages), against one core's fallocate rate times the CPUs the fillers may
# use.  Each round empties the pool (SIGHUP with enable = no), turns it on
# again and times the refill of POOL_MB from the daemon's counters (pages
# over the wall time with a page in flight); the script does not look
# while the pool fills, as each look takes CPU time from the fillers.  The
# kernel's rate is a fallocate of the same pages into a hugetlb memfd on
# one core, in the same run, between the rounds.  Memory is warmed first.
#   HPZ_BUILDDIR=build tests/tools/pool-fill.sh [ROUNDS]
set -u
: "${HPZ_BUILDDIR:?}"
B=$HPZ_BUILDDIR
S=$(cd "$(dirname "$0")/../.." && pwd)
ROUNDS=${1:-5}
POOL_MB=${POOL_MB:-1024}
PAGES=$((POOL_MB / 2))
. "$S/tests/hugepages.sh"
hp_alone
dir=$(mktemp -d /tmp/hpz-fill.XXXXXX)
pid=''
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	hp_release
	rm -rf "$dir"
}
trap cleanup EXIT
hp_reserve_2m $((PAGES + 16))
# One core's fallocate of PAGES pages (the kernel zeroing them), in s.
falloc() {
	taskset -c 0 python3 -c '
import os, sys, time
n = int(sys.argv[1])
fd = os.memfd_create("f", os.MFD_HUGETLB | (21 << 26))
t = time.monotonic()
os.posix_fallocate(fd, 0, n << 21)
print("%.6f" % (time.monotonic() - t))' "$PAGES"
}
# Every core at once: NCPU processes, one pinned to each core, each
# fallocating PAGES / NCPU pages from one start time; the machine's own
# parallel zeroing rate (what fillers on every idle core could reach at
# best), in s from the start to the last one's end.
falloc_all() {
	python3 -c '
import os, sys, time
n, c = int(sys.argv[1]), int(sys.argv[2])
start = time.monotonic() + 0.2
kids = []
for i in range(c):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.sched_setaffinity(0, {i})
        fd = os.memfd_create("f", os.MFD_HUGETLB | (21 << 26))
        while time.monotonic() < start:
            pass
        os.posix_fallocate(fd, 0, (n // c) << 21)
        os.write(w, b"%.9f" % time.monotonic())
        os._exit(0)
    os.close(w)
    kids.append((pid, r))
end = 0.0
for pid, r in kids:
    end = max(end, float(os.read(r, 64)))
    os.waitpid(pid, 0)
print("%.6f" % (end - start))' "$PAGES" "$(nproc)"
}
falloc >/dev/null	# warm: the VM backs the pages once
cat >"$dir/on.conf" <<EOC
[pool]
size_2m = ${POOL_MB}M
reserve_2m = 16M
size_1g = 0
EOC
printf '[pool]\nenable = no\n' >"$dir/off.conf"
cp "$dir/off.conf" "$dir/hpzerod.conf"
"$B/daemon/hpzerod" --config "$dir/hpzerod.conf" --socket "$dir/s.sock" \
    --workers 2 2>"$dir/hpzerod.log" 8>&- &
pid=$!
for i in $(seq 100); do [ -S "$dir/s.sock" ] && break; sleep 0.05; done
ctr() {
	"$B/client/hpzctl" -s "$dir/s.sock" stats --json |
	    awk -v k="\"$1\"" '/"pools"/ { p = 1 } p && index($0, k) {
		gsub(/[^0-9]/, "", $NF); print $NF; exit }'
}
ncpu=$(nproc)
echo "pool refill, $POOL_MB MiB of 2 MiB pages, $ncpu CPUs ($ncpu fillers), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
	k=$(falloc)
	a=$(falloc_all)
	f0=$(ctr filled_pages) n0=$(ctr fill_ns)
	cp "$dir/on.conf" "$dir/hpzerod.conf"
	kill -HUP "$pid"
	# No look while it fills: each hpzctl takes CPU time the fillers, at
	# SCHED_IDLE, would have had (the counters time the fill itself).
	sleep 1
	for i in $(seq 200); do
		[ "$(ctr ready_pages)" -ge "$PAGES" ] && break
		sleep 0.1
	done
	f1=$(ctr filled_pages) n1=$(ctr fill_ns)
	cp "$dir/off.conf" "$dir/hpzerod.conf"
	kill -HUP "$pid"
	for i in $(seq 400); do [ "$(ctr ready_pages)" = 0 ] && break; sleep 0.01; done
	awk -v k="$k" -v a="$a" -v p="$PAGES" -v df=$((f1 - f0)) -v dn=$((n1 - n0)) \
	    -v c="$ncpu" 'BEGIN {
		kg = p * 2 / 1024 / k; pg = df * 2 / 1024 / (dn / 1e9)
		ag = (p - p % c) * 2 / 1024 / a
		printf "round %d: pool %.1f GB/s, one core fallocate %.1f GB/s, x %d = %.1f: %.2fx; %d cores fallocating at once %.1f GB/s: %.2fx of that\n",
		    '"$r"', pg * 1.073741824, kg * 1.073741824, c, kg * c * 1.073741824, pg / (kg * c), c, ag * 1.073741824, pg / ag
		printf "%.3f %.3f %.3f %.3f %.3f\n", pg * 1.073741824, kg * 1.073741824,
		    ag * 1.073741824, pg / (kg * c), pg / ag >> "'"$dir/rounds"'" }'
done
# Medians and ranges of the rounds: one column at a time.
col() {
	cut -d' ' -f"$1" "$dir/rounds" | sort -g | awk '{ v[NR] = $1 }
	    END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.2f (%.2f-%.2f)", m, v[1], v[NR] }'
}
echo "over $ROUNDS rounds, median (min-max): pool $(col 1) GB/s; one core" \
    "fallocate $(col 2) GB/s; $ncpu cores at once $(col 3) GB/s;" \
    "pool / ($ncpu x one core) $(col 4)x; pool / all cores at once $(col 5)x"
