#!/bin/bash
# pool-charge.sh - a measurement, not a test (not part of make check): to
# which cgroup the kernel charges huge pages of hpzerod's pool, and the
# other ways a region's pages get allocated.  hpzerod runs in one cgroup v2
# group, a client in another; the script prints each group's
# hugetlb.2MB.current (and, where the memory controller is there, its
# memory.current or the v1 memory.usage_in_bytes) after each step:
#   pool filled           the daemon's filler allocated the pool
#   pool file touched     the client took a pool file and touched it all
#   own memfd touched     the client's own memfd (HPZ_NO_POOL), unregistered,
#                         touched: the client's own first touches
#   served fresh          the same registered with hpzerod (MISSING faults:
#                         the daemon allocates)
#
#   tests/tools/pool-charge.sh [-S size]
#
# HPZ_BUILDDIR (default ./build) is a built tree.  Needs root and a cgroup
# v2 hierarchy with the hugetlb controller (/sys/fs/cgroup, or
# /sys/fs/cgroup/unified on a hybrid system); it makes a group of its own
# and removes it, and gives back the huge pages it added.
set -u
SIZE_MB=256
while getopts S:h o; do
	case $o in
	S) SIZE_MB=${OPTARG%M} ;;
	*) echo "usage: $0 [-S size-in-MiB]" >&2; exit 2 ;;
	esac
done
S=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${HPZ_BUILDDIR:-./build}" 2>/dev/null && pwd) ||
	{ echo "pool-charge: no build tree" >&2; exit 1; }
die() { echo "pool-charge: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root"

V2=
for d in /sys/fs/cgroup /sys/fs/cgroup/unified; do
	if [ -f "$d/cgroup.controllers" ] && grep -qw hugetlb "$d/cgroup.controllers"; then
		V2=$d
		break
	fi
done
[ -n "$V2" ] || die "no cgroup v2 hierarchy with the hugetlb controller"
V1MEM=
[ -d /sys/fs/cgroup/memory ] && [ -f /sys/fs/cgroup/memory/cgroup.procs ] &&
	V1MEM=/sys/fs/cgroup/memory

. "$S/tests/hugepages.sh"
pages=$((SIZE_MB / 2))
top=$V2/hpz-charge.$$
dir=$(mktemp -d /tmp/hpz-charge.XXXXXX)
pid=''
root_had=0
grep -qw hugetlb "$V2/cgroup.subtree_control" && root_had=1
# shellcheck disable=SC2317  # called by the trap
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	for g in daemon client; do
		[ -d "$top/$g" ] && { cat "$top/$g/cgroup.procs" 2>/dev/null |
		    while read -r p; do echo "$p" >"$V2/cgroup.procs"; done
		    rmdir "$top/$g"; }
		[ -n "$V1MEM" ] && [ -d "$V1MEM/hpz-charge.$$-$g" ] && {
		    cat "$V1MEM/hpz-charge.$$-$g/cgroup.procs" 2>/dev/null |
		    while read -r p; do echo "$p" >"$V1MEM/cgroup.procs"; done
		    rmdir "$V1MEM/hpz-charge.$$-$g"; }
	done
	[ -d "$top" ] && rmdir "$top"
	[ "$root_had" = 0 ] && echo "-hugetlb" >"$V2/cgroup.subtree_control" 2>/dev/null
	hp_release
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "+hugetlb" >"$V2/cgroup.subtree_control" || die "cannot enable hugetlb in $V2"
mkdir "$top" || die "mkdir $top"
echo "+hugetlb" >"$top/cgroup.subtree_control" || die "cannot enable hugetlb in $top"
mkdir "$top/daemon" "$top/client" || die "mkdir"
memv2=0
grep -qw memory "$top/cgroup.controllers" &&
	echo "+memory" >"$top/cgroup.subtree_control" 2>/dev/null && memv2=1
if [ -n "$V1MEM" ] && [ "$memv2" = 0 ]; then
	mkdir "$V1MEM/hpz-charge.$$-daemon" "$V1MEM/hpz-charge.$$-client" ||
		V1MEM=''
fi

hp_reserve_2m $((3 * pages + 16))
sock=$dir/s.sock
printf '[pool]\nsize_2m = %sM\nreserve_2m = 16M\nsize_1g = 0\n' "$SIZE_MB" >"$dir/c.conf"
# The daemon starts in its group, so its threads are there from the start.
sh -c 'echo $$ >"$1/cgroup.procs" && { [ -z "$2" ] || echo $$ >"$2/cgroup.procs"; } &&
    exec "$3/daemon/hpzerod" --config "$4" --socket "$5" --workers 2' sh \
    "$top/daemon" "${V1MEM:+$V1MEM/hpz-charge.$$-daemon}" "$B" "$dir/c.conf" "$sock" \
    2>"$dir/d.log" &
pid=$!
for _ in $(seq 400); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || { cat "$dir/d.log" >&2; die "hpzerod did not start"; }

mem_of() {
	if [ "$memv2" = 1 ]; then
		echo $(( $(cat "$top/$1/memory.current") >> 20 ))
	elif [ -n "$V1MEM" ]; then
		echo $(( $(cat "$V1MEM/hpz-charge.$$-$1/memory.usage_in_bytes") >> 20 ))
	else
		echo -
	fi
}
show() {
	printf '%-22s %10s %10s %12s %12s\n' "$1" \
	    $(( $(cat "$top/daemon/hugetlb.2MB.current") >> 20 )) \
	    $(( $(cat "$top/client/hugetlb.2MB.current") >> 20 )) \
	    "$(mem_of daemon)" "$(mem_of client)"
}
ready() {
	"$B/client/hpzctl" -s "$sock" stats --json | awk '/"pools"/ { p = 1 }
	    p && /"ready_pages"/ { gsub(/[^0-9]/, "", $NF); print $NF; exit }'
}
for _ in $(seq 400); do [ "$(ready)" -ge "$pages" ] 2>/dev/null && break; sleep 0.05; done

# The client: a region made one of three ways, every page touched, held
# until we have read the counts.
cat >"$dir/client.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "hpz.h"
/* argv[1]: pool, own or served; touch every page, then wait for stdin. */
int
main(int argc, char **argv)
{
	struct hpz_region	r;
	size_t			len = (size_t)atol(argv[2]) << 20, i;
	unsigned int		fl = HPZ_PAGE_2M;

	if (strcmp(argv[1], "pool") != 0)
		fl |= HPZ_NO_POOL;
	if (hpz_region_create(&r, len, fl) != 0 ||
	    (strcmp(argv[1], "served") == 0 && hpz_register(&r) != 0)) {
		fprintf(stderr, "client: %s\n", hpz_last_error());
		return (1);
	}
	for (i = 0; i < len; i += 4096)
		((volatile char *)r.addr)[i] = 1;
	printf("ready\n");
	fflush(stdout);
	(void)getchar();
	hpz_region_destroy(&r);
	return (0);
}
EOF
cc -I"$S/lib" -I"$B/lib" -o "$dir/client" "$dir/client.c" "$B/lib/.libs/libhpz.so" \
    -Wl,-rpath,"$B/lib/.libs" || die "cannot build the client"

printf '%-22s %10s %10s %12s %12s\n' "MiB charged" "daemon" "client" \
    "daemon mem" "client mem"
show "pool filled"
for mode in pool own served; do
	mkfifo "$dir/in.$mode"
	HPZ_SOCKET=$sock sh -c 'echo $$ >"$1/cgroup.procs" &&
	    { [ -z "$2" ] || echo $$ >"$2/cgroup.procs"; } &&
	    exec "$3" "$4" "$5" <"$6"' sh "$top/client" \
	    "${V1MEM:+$V1MEM/hpz-charge.$$-client}" "$dir/client" "$mode" \
	    "$SIZE_MB" "$dir/in.$mode" >"$dir/out.$mode" &
	cpid=$!
	exec 7>"$dir/in.$mode"
	for _ in $(seq 400); do grep -q ready "$dir/out.$mode" && break; sleep 0.05; done
	case $mode in
	pool) show "pool file touched" ;;
	own) show "own memfd touched" ;;
	served) show "served fresh" ;;
	esac
	echo >&7
	exec 7>&-
	wait $cpid
	# The pool refills: wait for it before the next step.
	for _ in $(seq 400); do [ "$(ready)" -ge "$pages" ] 2>/dev/null && break; sleep 0.05; done
done
show "all clients gone"
echo "(cgroup v2 at $V2; memory: $([ "$memv2" = 1 ] && echo "v2 memory.current" ||
    { [ -n "$V1MEM" ] && echo "v1 memory.usage_in_bytes"; } || echo none);" \
    "region and pool $SIZE_MB MiB)"
