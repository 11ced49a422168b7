#!/bin/bash
# vmstart.sh - a benchmark, not a test (not part of make check): how long a
# QEMU (TCG) guest takes from QEMU's start until it has touched every 4 KiB
# page of its RAM once, with its RAM served by the kernel and by hpzerod.
#
#   tests/tools/vmstart.sh [-r RUNS] [-s SIZES] [-p 2m|1g [-d]]
#
# HPZ_BUILDDIR (default ./build) is a built tree; HPZ_QEMU, HPZ_GUEST_CC and
# HPZ_GUEST_LD as for tests/qemu/qemu.sh.  Needs root: it grows the 2 MiB
# huge page pool (and restores it), mounts a temporary hugetlbfs and starts
# a private hpzerod.  The guest is tests/qemu/qemu.sh's, booted with
# "-append touch": it reads one word of each page, checks that it is zero,
# and exits through isa-debug-exit
# (QEMU exits 1 when every page read zero).
#
# For each size, after warming every free page of the huge page pool and one
# untimed warm-up run, each of RUNS rounds times
# these, in this order (wall clock, from just before QEMU starts to its exit):
#   kernel lazy      hugetlb memfd, the kernel clears on first touch
#   prealloc         the same, prealloc=on
#   floor lazy       a hugetlbfs file fallocated (untimed) beforehand, no
#                    hpzerod: every page allocated and zero, the best a
#                    pool can reach
#   floor prealloc   the same, prealloc=on
#   pool lazy        hpz-run defaults, the pool holding the guest's RAM
#                    (waited for, untimed): the memfd becomes a pool file
#   pool prealloc    the same, prealloc=on
#   hpz-run lazy     hpz-run -f nopool -- (kernel lazy)
#   hpz-run eager    hpz-run -f nopool,eager,premap -- (kernel lazy)
#   recycled hpz     a hugetlbfs file that held the last guest's RAM (filled
#                    untimed with a pattern first), hpz-run -f discard,premap
#   recycled kernel  the kernel's way to a zeroed file: rm, fallocate a new
#                    one, plain QEMU on it (rm + fallocate are timed too)
# and prints per size: median seconds (min-max), and the medians of the
# per-round ratios to kernel lazy and to prealloc of the same round.
#
# -p 1g: guest RAM of 1 GiB pages (sizes whole GiB, default 6G: what this
# machine holds; a round needs the guest and one more in free 1 GiB pages),
# and these rows, each lazy and prealloc=on, interleaved the same way:
#   kernel           plain QEMU on a 1 GiB-page memfd
#   floor            a 1 GiB-page hugetlbfs file fallocated (untimed)
#   pool full        hpz-run, [pool] size_1g = the guest (filled, untimed)
#   pool half        hpz-run, [pool] size_1g = half the guest
# -d (with -p 1g): the pool rows run on hpzerod's defaults, not a pool
# sized to the guest: [pool] names no 1 GiB size or reserve, so the pool
# holds every free 1 GiB page above the default reserve (2G), and the
# host is given the guest, one page and that reserve; no pool-half rows
# (the defaults make no half pool).
# and the pool's refill after each pool-full guest exits: seconds from
# QEMU's exit until the pool holds the guest's size again (liveness bound
# 120 s), with the pages it held at the exit, beside one core zeroing the
# same (the kernel's fallocate of a file of the guest's size, 3 times).
# The 32-bit guest touches the RAM below 4 GiB; prealloc=on allocates all
# of it.
set -u
usage() { echo "usage: $0 [-r RUNS] [-s SIZES] [-p 2m|1g [-d]]   (SIZES: \"1G 2G\", \"512M\"...)" >&2; exit 2; }

RUNS=5 SIZES='' PG=2m DEFAULTS=0
RES1G=2			# GiB: hpzerod.conf(5)'s default reserve_1g
while getopts r:s:p:dh o; do
	case $o in
	r) RUNS=$OPTARG ;;
	s) SIZES=$OPTARG ;;
	p) PG=$OPTARG ;;
	d) DEFAULTS=1 ;;
	*) usage ;;
	esac
done
case $PG in
2m) PMB=2 PKB=2048 PSZ=2M SIZES=${SIZES:-"1G 2G"} ;;
1g) PMB=1024 PKB=1048576 PSZ=1G SIZES=${SIZES:-6G} ;;
*) usage ;;
esac
shift $((OPTIND - 1))
[ $# = 0 ] || usage
[ "$DEFAULTS" = 0 ] || [ "$PG" = 1g ] || usage
case $RUNS in '' | *[!0-9]* | 0) usage ;; esac

S=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${HPZ_BUILDDIR:-./build}" 2>/dev/null && pwd) ||
	{ echo "vmstart: no build tree ${HPZ_BUILDDIR:-./build}" >&2; exit 1; }
QEMU=${HPZ_QEMU:-qemu-system-x86_64}
SLACK=16		# 2 MiB pages beyond two guests' RAM
QTIMEOUT=600		# seconds, for one QEMU

die() { echo "vmstart: $*" >&2; exit 1; }
say() { echo "vmstart: $*" >&2; }

# The size in MiB: N, NM or NG.
size_mb() {
	case $1 in
	*[!0-9MG]* | '' | [MG]*) return 1 ;;
	*G) echo $(( ${1%G} * 1024 )) ;;
	*M) echo "${1%M}" ;;
	*[0-9]) echo "$1" ;;
	*) return 1 ;;
	esac
}
for sz in $SIZES; do
	mb=$(size_mb "$sz") || usage
	if [ $((mb % PMB)) != 0 ] || [ "$mb" -lt 64 ]; then
		die "size $sz: not a multiple of $PSZ, or under 64 MiB"
	fi
	if [ "$PG" = 1g ] && [ $((mb / PMB)) -lt 2 ]; then
		die "size $sz: the pool-half rows need at least 2 GiB"
	fi
done

command -v "$QEMU" >/dev/null 2>&1 || die "$QEMU not found (Debian: qemu-system-x86)"
command -v timeout >/dev/null 2>&1 || die "timeout(1) not found"
command -v fallocate >/dev/null 2>&1 || die "fallocate(1) not found"
[ "$(id -u)" = 0 ] || die "needs root (huge page pool, hugetlbfs mount, userfaultfd)"
if grep -q '^SAN_CFLAGS = -fsanitize' "$B/Makefile" 2>/dev/null; then
	die "sanitizer build: the preload cannot be injected into QEMU"
fi
NR=/sys/kernel/mm/hugepages/hugepages-${PKB}kB/nr_hugepages
FREE=/sys/kernel/mm/hugepages/hugepages-${PKB}kB/free_hugepages
[ -w "$NR" ] || die "no $PSZ huge pages ($NR)"
for f in daemon/hpzerod client/hpz-run client/hpzctl client/.libs/libhpz-preload.so; do
	[ -e "$B/$f" ] || die "$B/$f not built"
done

# The guest, as tests/qemu/qemu.sh builds it.
G=$B/tests/tools/vmstart
. "$S/tests/qemu/common.sh"
guest_build >&2 || die "cannot build the guest"

# Pages only through hugepages.sh: add what a size needs, give back
# exactly that (other users of the machine reserve at the same time), and
# keep the other heavy tests out while the figures are taken.
. "$S/tests/hugepages.sh"
. "$S/tests/hpzd.sh"
hp_alone
dir=$(mktemp -d /tmp/hpz-vmstart.XXXXXX) || exit 1
pid='' qpid='' mnt=''
# shellcheck disable=SC2317  # called by the trap
cleanup() {
	[ -n "$qpid" ] && kill "$qpid" 2>/dev/null && wait "$qpid" 2>/dev/null
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	if [ -n "$mnt" ]; then
		rm -f "$mnt/ram"
		umount "$mnt" 2>/dev/null
	fi
	hp_release
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

sock=$dir/hpzerod.sock
# The pool: the guest's RAM (MiB), set again for each size (SIGHUP); the
# other page size's pool stays empty (other users' pages are not ours).
# Every guest here runs as root: uid_share = 0, or the default share would
# refuse the rounds after the first within a minute.
pool_conf() {
	if [ "$PG" = 1g ] && [ "$DEFAULTS" = 1 ] && [ "$1" != 0 ]; then
		# The defaults: every free 1 GiB page above the reserve.
		printf '[pool]\nuid_share = 0\nsize_2m = 0\n' >"$dir/hpzerod.conf"
	elif [ "$PG" = 1g ]; then
		printf '[pool]\nuid_share = 0\nsize_2m = 0\nsize_1g = %sG\nreserve_1g = 0\n' \
		    $(($1 / 1024)) >"$dir/hpzerod.conf"
	else
		printf '[pool]\nuid_share = 0\nsize_2m = %sM\nreserve_2m = %sM\nsize_1g = 0\n' \
		    "$1" $((2 * SLACK)) >"$dir/hpzerod.conf"
	fi
}
pool_conf 0
"$B/daemon/hpzerod" --config "$dir/hpzerod.conf" --socket "$sock" \
    --workers 2 2>"$dir/hpzerod.log" &
pid=$!
for _ in $(seq 400); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || { cat "$dir/hpzerod.log" >&2; die "hpzerod did not start"; }
export HPZ_PRELOAD=$B/client/.libs/libhpz-preload.so
unset HPZ_RUN_FLAGS HPZ_RUN_MIN

mnt=$dir/hugetlbfs
mkdir "$mnt" || exit 1
if ! mount -t hugetlbfs -o pagesize=$PSZ none "$mnt" 2>"$dir/mount.err"; then
	mnt=''
	die "cannot mount hugetlbfs: $(cat "$dir/mount.err")"
fi

registers() {
	"$B/client/hpzctl" -s "$sock" stats --json |
	    grep -o '"registers" *: *[0-9]*' | grep -o '[0-9]*$'
}

now() { echo "${EPOCHREALTIME:-$(date +%s.%N)}"; }

# One field of the pool of our page size in hpzctl stats --json (the
# first node's: this machine has one).
pool_field() {
	"$B/client/hpzctl" -s "$sock" stats --json |
	    awk -v k="\"$1\"" -v ps=$((PKB * 1024)) '/"pools"/ { p = 1 }
		p && /"page_size"/ { v = $NF; gsub(/[^0-9]/, "", v); s = v == ps }
		p && s && index($0, k) { gsub(/[^0-9]/, "", $NF); print $NF; exit }'
}

# Wait, untimed, until the pool holds N pages (default the guest's RAM),
# and with EXACT no more (a pool made smaller gives pages back); a
# liveness bound of 20 s, 120 s for 1 GiB pages (zeroed on idle cores).
pool_wait() {
	local i r=0 want=${1:-$pages} exact=${2:-} n=400
	[ "$PG" = 1g ] && n=2400
	local h v
	for i in $(seq $n); do
		# One hpzctl a poll: the fillers are SCHED_IDLE, and the
		# refill is timed by this loop.
		read -r r h v < <("$B/client/hpzctl" -s "$sock" stats --json |
		    awk -v ps=$((PKB * 1024)) 'function num(s) {
			gsub(/[^0-9]/, "", s); return s }
			/"pools"/ { p = 1 }
			p && /"page_size"/ { s = num($NF) == ps }
			p && s && /"ready_pages"/ { r = num($NF) }
			p && s && /"host_avail_pages"/ { h = num($NF) }
			p && s && /"reserve_pages"/ { v = num($NF) }
			p && s && r != "" && h != "" && v != "" {
				print r, h, v; exit }')
		# The defaults hold every free page above the reserve: wait
		# until they do, not only for the guest's, or the pool would
		# still be clearing its last pages beside the guest's start.
		if [ "$DEFAULTS" = 1 ] && [ -z "$exact" ] &&
		    [ "${h:-1}" -gt "${v:-0}" ]; then
			sleep 0.05
			continue
		fi
		if [ "${r:-0}" -ge "$want" ] &&
		    { [ -z "$exact" ] || [ "${r:-0}" -le "$want" ]; }; then
			return 0
		fi
		sleep 0.05
	done
	say "$sz: the pool holds ${r:-?} of $want pages after $((n / 20)) s"
	return 1
}

timed=0 bad=0
# qemu NAME WRAP MODE BACKEND [PRE-COMMAND...]: runs QEMU (under hpz-run
# flags WRAP, "-" for none, "" for hpz-run's defaults) with the guest in MODE
# ("touch"; "fill", the default mode; "full", the same, which must find
# every word zero); sets secs (the wall clock, from just before
# PRE-COMMAND or QEMU) and ok.  A fill run may also find the old pattern.
qemu() {
	local name=$1 wrap=$2 mode=$3 backend=$4 rc r0='' r1 t0 t1 why=''
	local out=$dir/out err=$dir/err
	shift 4
	local -a cmd=() app=()
	[ "$mode" = touch ] && app=(-append touch)
	if [ "$wrap" != - ]; then
		cmd=("$B/client/hpz-run" -s "$sock")
		[ -n "$wrap" ] && cmd+=(-f "$wrap")
		cmd+=(--)
		r0=$(registers)
	fi
	free0=$(cat "$FREE")
	t0=$(now)
	if [ $# -gt 0 ]; then
		"$@" || { echo "vmstart: $name: $* failed" >&2; }
	fi
	timeout "$QTIMEOUT" "${cmd[@]}" "$QEMU" -accel tcg -nographic \
	    -nic none -serial stdio -monitor none \
	    -device isa-debug-exit,iobase=0xf4,iosize=4 \
	    -kernel "$GUEST" "${app[@]}" -m "${mb}M" \
	    -object "$backend" -machine pc,memory-backend=m \
	    </dev/null >"$out" 2>"$err" &
	qpid=$!
	wait $qpid
	rc=$?
	qpid=
	t1=$(now)
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
	if [ "$rc" = 124 ]; then
		why="QEMU timed out after $QTIMEOUT s"
	elif [ "$mode" = fill ] && [ "$rc" = 5 ] &&
	    grep -aq '^guest: checked .* pattern ok' "$out"; then
		:	# the file held the last fill's pattern; it holds it again
	elif [ "$rc" != 1 ]; then
		why="QEMU exited $rc (guest code $(( (rc - 1) / 2 )) if odd; 1 means all zero)"
	elif [ "$mode" = touch ] &&
	    ! grep -aqE '^guest: touched [1-9][0-9]* pages, 0 non-zero words' "$out"; then
		why="no 'guest: touched N pages, 0 non-zero words' line"
	elif [ "$mode" = fill ] && ! grep -aq '^guest: checked .* pattern ok' "$out"; then
		why="no 'pattern ok' line"
	elif [ "$mode" = full ] && ! grep -aqE \
	    '^guest: checked [1-9][0-9]* pages, 0 non-zero words, pattern ok' "$out"; then
		why="no 'guest: checked N pages, 0 non-zero words, pattern ok' line"
	elif [ -n "$r0" ] && [ "${name#pool-}" = "$name" ] &&
	    [ "${name#half-}" = "$name" ]; then
		r1=$(registers)
		if [ -z "$r0" ] || [ -z "$r1" ] || [ "$r1" -le "$r0" ]; then
			why="hpz-run registered nothing (registers $r0 -> ${r1:-?})"
		fi
	fi
	if [ -z "$why" ] && ! kill -0 "$pid" 2>/dev/null; then
		why="hpzerod died"
	fi
	ok=1
	if [ -n "$why" ]; then
		ok=0
		{
			echo "vmstart: $name ${mb}M: FAILED: $why"
			echo "  --- hpz-run and QEMU stderr ---"; sed 's/^/  /' "$err" | tail -20
			echo "  --- serial ---"; tr -d '\r' <"$out" | sed 's/^/  /' | tail -20
		} >&2
	fi
	touched=$(tr -d '\r' <"$out" | grep -ao '^guest: touched [0-9]*' | grep -o '[0-9]*$')
}

# The configurations, in the order they run each round.
CONFIGS=(lazy prealloc floor-lazy floor-prealloc pool-lazy pool-prealloc
	hpz-lazy hpz-eager recycled-hpz recycled-kernel)
declare -A LABEL=(
	[lazy]="kernel lazy"
	[prealloc]="kernel prealloc=on"
	[floor-lazy]="floor: populated file, lazy"
	[floor-prealloc]="floor: populated file, prealloc=on"
	[pool-lazy]="pool: hpz-run, lazy"
	[pool-prealloc]="pool: hpz-run, prealloc=on"
	[hpz-lazy]="hpz-run nopool, lazy"
	[hpz-eager]="hpz-run nopool,eager,premap"
	[recycled-hpz]="recycled file, hpz-run discard,premap"
	[recycled-kernel]="recycled file, kernel rm+fallocate"
)

# Median and min-max of column $1, and the medians of the per-row ratios
# of column $1 to columns $2 and $3, of file $4 (one round a row).
summary() {
	awk -v c="$1" -v k="$2" -v p="$3" '
	function med(a, n,   i, j, t) {
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
				t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
			}
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	# A failed run (FAIL) has no time, and no ratio in its round.
	$c !~ /^[0-9.]+$/ { f++; next }
	{ n++; t[n] = $c
	  if ($k ~ /^[0-9.]+$/) rk[++nk] = $c / $k
	  if ($p ~ /^[0-9.]+$/) rp[++np] = $c / $p }
	END {
		if (n == 0) {
			printf "       -  (every run failed)\n"
			exit
		}
		mn = mx = t[1]
		for (i = 2; i <= n; i++) {
			if (t[i] < mn) mn = t[i]
			if (t[i] > mx) mx = t[i]
		}
		printf "%8.3f  (%.3f-%.3f)  %6.2f  %6.2f%s\n",
		    med(t, n), mn, mx, med(rk, nk), med(rp, np),
		    f ? sprintf("  (%d failed, left out)", f) : ""
	}' "$4"
}

memfd() { echo "memory-backend-memfd,id=m,size=${mb}M,hugetlb=on,hugetlbsize=$PSZ,share=on$1"; }
fileb() { echo "memory-backend-file,id=m,size=${mb}M,mem-path=$mnt/ram,share=on,discard-data=off"; }
floorb() { echo "memory-backend-file,id=m,size=${mb}M,mem-path=$mnt/floor,share=on,discard-data=off$1"; }

# The 1 GiB rows (-p 1g), in the order they run each round.
CONFIGS_1G=(lazy prealloc floor-lazy floor-prealloc pool-lazy pool-prealloc
	half-lazy half-prealloc)
if [ "$DEFAULTS" = 1 ]; then
	CONFIGS_1G=(lazy prealloc floor-lazy floor-prealloc pool-lazy
		pool-prealloc)
	LABEL[pool-lazy]="pool, defaults: hpz-run, lazy"
	LABEL[pool-prealloc]="pool, defaults: hpz-run, prealloc=on"
fi
LABEL+=(
	[half-lazy]="pool at half: hpz-run, lazy"
	[half-prealloc]="pool at half: hpz-run, prealloc=on"
)

# Set the pool to MiB and wait (untimed) until it holds exactly that.
pool_now=0
pool_set() {
	[ "$pool_now" = "$1" ] && return 0
	pool_conf "$1"
	kill -HUP "$pid"
	pool_now=$1
	if [ "$DEFAULTS" = 1 ] && [ "$1" != 0 ]; then
		pool_wait	# every free page above the reserve: the guest's and more
	else
		pool_wait $(($1 / PMB)) exact
	fi
}

# A guest started without hpzerod beside the default pool (-d: a mixed
# host): plain QEMU maps the guest's RAM while the pool holds every free
# page above the reserve, twice, 0.5 s apart; then with reserve_1g set to
# the guest.  Each try prints how it ended: "started" or QEMU's refusal.
mixed_try() {
	qemu "$1" - touch "$(memfd '')" 2>"$dir/mixed.err"
	if [ "$ok" = 1 ]; then
		echo "started, $secs s"
	elif grep -q 'Cannot allocate memory' "$dir/err"; then
		echo "refused at once: Cannot allocate memory ($secs s)"
	else
		cat "$dir/mixed.err" >&2
		echo "FAILED otherwise (see above)"
	fi
}
mixed() {
	local a b c
	pool_wait || bad=$((bad + 1))
	say "$sz: mixed host: plain QEMU beside a full pool on the defaults"
	a=$(mixed_try mixed-1)
	sleep 0.5
	b=$(mixed_try mixed-2)
	printf '[pool]\nuid_share = 0\nsize_2m = 0\nreserve_1g = %sM\n' "$mb" >"$dir/hpzerod.conf"
	kill -HUP "$pid"
	pool_now=-1
	# The pool gives back to the new reserve: it keeps the rest.
	pool_wait $((need - pages)) exact || bad=$((bad + 1))
	c=$(mixed_try mixed-reserve)
	mixed_out="plain QEMU (lazy) beside the default pool, free pages $need:
  first try                              $a
  again 0.5 s later                      $b
  reserve_1g = $sz (the guest)           $c"
}

# One size of 1 GiB pages: RUNS interleaved rounds of CONFIGS_1G, then the
# table and the pool's refill after each pool-full guest.  The pool is
# emptied (untimed) for the plain and floor rows, so a guest and one page
# are all the pages needed: a pool-full guest's pool refills after it
# exits, as it would on a host with no pages to spare.
size_1g() {
	local c r row half=$((mb / 2 / PMB * PMB)) t0 t1 r0 rs tpages=
	need=$((pages + 1))
	[ "$DEFAULTS" = 1 ] && need=$((need + RES1G))
	hp_reserve_1g "$need"
	# With the defaults the spare page may go: the pool then holds the
	# guest's pages and no more, which a full host does too.
	least=$need
	[ "$DEFAULTS" = 1 ] && least=$((need - 1))
	if [ "$(cat "$FREE")" -lt "$least" ]; then
		echo "size $sz: skipped: the kernel gave $(cat "$FREE") free 1 GiB pages, $least needed"
		hp_release
		return
	fi
	free=$(cat "$FREE")
	if [ "$free" -lt "$need" ]; then
		say "$sz: the kernel gave $free free 1 GiB pages, not $need: no spare page, the default pool holds the guest's pages and no more"
		need=$free
	fi
	say "$sz: warm-up: fallocate $free free 1 GiB pages, then kernel lazy, untimed"
	fallocate -l $((free * PMB))M "$mnt/warm" || say "$sz: warm-up fallocate failed"
	rm -f "$mnt/warm"
	qemu warm-up - touch "$(memfd '')"
	[ "$ok" = 1 ] || bad=$((bad + 1))
	res=$dir/res.$sz refill=$dir/refill.$sz
	: >"$res"
	: >"$refill"
	for r in $(seq "$RUNS"); do
		row=''
		for c in "${CONFIGS_1G[@]}"; do
			case $c in
			lazy | prealloc | floor-*)
				pool_set 0 || bad=$((bad + 1)) ;;
			esac
			case $c in
			lazy)	  qemu "$c" - touch "$(memfd '')" ;;
			prealloc) qemu "$c" - touch "$(memfd ,prealloc=on)" ;;
			floor-*)
				rm -f "$mnt/floor"
				fallocate -l "${mb}M" "$mnt/floor" ||
				    say "$sz: fallocate of the floor file failed"
				if [ "$c" = floor-lazy ]; then
					qemu "$c" - touch "$(floorb '')"
				else
					qemu "$c" - touch "$(floorb ,prealloc=on)"
				fi
				rm -f "$mnt/floor" ;;
			pool-* | half-*)
				if [ "${c%%-*}" = pool ]; then
					pool_set "$mb" || bad=$((bad + 1))
				else
					pool_set "$half" || bad=$((bad + 1))
				fi
				h0=$(pool_field handouts)
				if [ "${c#*-}" = lazy ]; then
					qemu "$c" '' touch "$(memfd '')"
				else
					qemu "$c" '' touch "$(memfd ,prealloc=on)"
				fi
				t0=$(now)
				r0=$(pool_field ready_pages)
				f0=$(pool_field filled_pages) n0=$(pool_field fill_ns)
				h1=$(pool_field handouts)
				if [ "${c%%-*}" = pool ] && [ "$h1" != $((h0 + 1)) ]; then
					say "$sz: $c: no pool file was handed out"
					ok=0
				fi
				if [ "${c%%-*}" = pool ]; then
					# The refill: the pages QEMU gave back.
					pool_wait || bad=$((bad + 1))
					t1=$(now)
					f1=$(pool_field filled_pages) n1=$(pool_field fill_ns)
					rs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
					# The pool's own rate: pages over the
					# wall time it had a page in flight.
					echo "$rs ${r0:-0} $(awk -v f="$((f1 - f0))" \
					    -v n="$((n1 - n0))" -v p="$PKB" 'BEGIN {
						printf "%.2f", (n > 0 ? f * p * 1024 / n : 0) }') $((f1 - f0))" >>"$refill"
					say "$sz round $r/$RUNS: pool refill after $c: $rs s (it held ${r0:-?} of $pages at the exit)"
				else
					# Untimed: the next row starts with the pool at
					# half again, not racing its refill for pages.
					pool_wait $((half / PMB)) || bad=$((bad + 1))
				fi ;;
			esac
			timed=$((timed + 1))
			[ "$ok" = 1 ] || bad=$((bad + 1))
			say "$sz round $r/$RUNS: ${LABEL[$c]}: $secs s${touched:+, $touched pages touched}, $free0 1 GiB pages free before$([ "$ok" = 1 ] || echo ', FAILED')"
			[ -n "$touched" ] && tpages=$touched
			if [ "$ok" = 1 ]; then row="$row $secs"; else row="$row FAIL"; fi
		done
		echo "$row" >>"$res"
	done
	mixed_out=''
	[ "$DEFAULTS" = 1 ] && mixed
	pool_set 0 || bad=$((bad + 1))
	# What the refill is set beside: one core zeroing the same pages, the
	# kernel's fallocate of a hugetlbfs file of the guest's size, 3 times.
	fa=''
	for r in 1 2 3; do
		rm -f "$mnt/fa"
		t0=$(now)
		fallocate -l "${mb}M" "$mnt/fa" || say "$sz: fallocate of $mb MiB failed"
		t1=$(now)
		rm -f "$mnt/fa"
		fa="$fa $(awk -v a="$t0" -v b="$t1" -v p="$pages" \
		    'BEGIN { printf "%.2f", p * 1.073741824 / (b - a) }')"
	done
	# And every core at once, each its share of the guest's pages on a
	# file of its own: what the kernel's zeroing reaches here, since two
	# cores' sum is not it (the VM's memory is not the same everywhere).
	ncpu=$(nproc) fall=''
	per=$((pages / ncpu)); [ "$per" -ge 1 ] || per=1
	for r in 1 2 3; do
		rm -f "$mnt"/fa.*
		t0=$(now)
		fpids=''
		for i in $(seq 0 $((ncpu - 1))); do
			{ taskset -c "$i" fallocate -l "$((per * PMB))M" "$mnt/fa.$i" ||
			    say "$sz: fallocate on CPU $i failed"; } &
			fpids="$fpids $!"
		done
		wait $fpids	# not hpzerod's
		t1=$(now)
		rm -f "$mnt"/fa.*
		fall="$fall $(awk -v a="$t0" -v b="$t1" -v p="$((per * ncpu))" \
		    'BEGIN { printf "%.2f", p * 1.073741824 / (b - a) }')"
	done
	hp_release
	echo
	echo "size $sz ($pages x 1 GiB pages), $RUNS rounds, TCG guest touching ${tpages:-?} 4 KiB pages (the RAM below 4 GiB)"
	printf '%-38s %8s  %-13s  %6s  %6s\n' config "median s" "(min-max)" "x lazy" "x pre"
	i=0
	for c in "${CONFIGS_1G[@]}"; do
		i=$((i + 1))
		printf '%-38s %s\n' "${LABEL[$c]}" "$(summary $i 1 2 "$res")"
	done
	# The pool against the floor, round by round (neighbours in time).
	for c in lazy prealloc; do
		i=0 fi=0 pi=0
		for x in "${CONFIGS_1G[@]}"; do
			i=$((i + 1))
			[ "$x" = "floor-$c" ] && fi=$i
			[ "$x" = "pool-$c" ] && pi=$i
		done
		[ "$fi" -gt 0 ] && [ "$pi" -gt 0 ] || continue
		awk -v f="$fi" -v q="$pi" -v c="$c" '
		$f ~ /^[0-9.]+$/ && $q ~ /^[0-9.]+$/ && $f > 0 {
			n++; r[n] = $q / $f }
		END {
			if (n == 0)
				exit
			for (i = 2; i <= n; i++)
				for (j = i; j > 1 && r[j - 1] > r[j]; j--) {
					x = r[j]; r[j] = r[j - 1]; r[j - 1] = x
				}
			m = n % 2 ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2
			printf "%-38s %8.2fx (%.2f-%.2f), the median of %d rounds\n",
			    "pool / floor, " c ", round by round", m, r[1], r[n], n
		}' "$res"
	done
	# GB/s: the pages the pool allocated (its counter; else the pages it
	# lacked at the exit) over the refill time.
	# A refill with no page allocated in its window (the pool refilled
	# before the exit was seen) has no rate of its own: left out.
	awk -v p="$pages" '{ n++; t[n] = $1; h = h " " $2
		if ($3 > 0) c[++nc] = $3
		f = $4 != "" ? $4 : p - $2
		g[n] = $1 > 0 ? f * 1.073741824 / $1 : 0 }
	function med(a, n,   i, j, x) {
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
				x = a[j]; a[j] = a[j - 1]; a[j - 1] = x
			}
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	END {
		if (n == 0)
			exit
		m = med(t, n); r = med(g, n)
		printf "%-38s %8.3f  (%.3f-%.3f)  %.2f GB/s; pages held at the exits:%s\n",
		    "pool refill after a pool-full guest", m, t[1], t[n], r, h
		if (nc == 0)
			exit
		cr = med(c, nc)
		printf "%-38s %8.2f GB/s (%.2f-%.2f), its counters: pages over the time a page was in flight%s\n",
		    "pool refill, the pool'"'"'s own rate", cr, c[1], c[nc],
		    nc < n ? sprintf(" (%d refills with none in their window left out)", n - nc) : ""
	}' "$refill"
	echo "$fa" | awk -v c="$(nproc)" '{ for (i = 1; i <= NF; i++) v[i] = $i
		for (i = 2; i <= NF; i++)
			for (j = i; j > 1 && v[j - 1] > v[j]; j--) {
				x = v[j]; v[j] = v[j - 1]; v[j - 1] = x
			}
		printf "%-38s %8.2f GB/s (%.2f-%.2f), %d CPUs\n",
		    "one core: fallocate of the guest size", v[2], v[1], v[3], c }'
	echo "$fall" | awk -v c="$ncpu" -v p="$per" '{ for (i = 1; i <= NF; i++) v[i] = $i
		for (i = 2; i <= NF; i++)
			for (j = i; j > 1 && v[j - 1] > v[j]; j--) {
				x = v[j]; v[j] = v[j - 1]; v[j - 1] = x
			}
		printf "%-38s %8.2f GB/s (%.2f-%.2f), %d at once, %d pages each\n",
		    "every core: fallocate at once", v[2], v[1], v[3], c, p }'
	[ -n "$mixed_out" ] && echo "$mixed_out"
	sizes_done=$((sizes_done + 1))
}

start=$(now)
sizes_done=0
for sz in $SIZES; do
	mb=$(size_mb "$sz")
	pages=$((mb / PMB))
	if [ "$PG" = 1g ]; then
		size_1g
		continue
	fi
	# Two guests' RAM (or a file and a guest), the pool's, its reserve.
	need=$((3 * pages + 3 * SLACK))
	hp_reserve_2m "$need"
	if [ "$(cat "$FREE")" -lt $((3 * pages + 2 * SLACK)) ]; then
		echo "size $sz: skipped: the huge page pool gave $(cat "$FREE") free 2 MiB pages, $((3 * pages + 2 * SLACK)) needed"
		hp_release
		continue
	fi
	# Warm memory: every free page of the pool once (fallocate on hugetlbfs
	# clears each page), not only those the first runs get: a page touched
	# for the first time since boot can cost ~4 ms more (the hypervisor).
	free=$(cat "$FREE")
	say "$sz: warm-up: fallocate $free free huge pages, then kernel lazy, untimed"
	fallocate -l $((free * 2))M "$mnt/warm" || say "$sz: warm-up fallocate failed"
	rm -f "$mnt/warm"
	qemu warm-up - touch "$(memfd '')"
	[ "$ok" = 1 ] || bad=$((bad + 1))
	pool_conf "$mb"
	kill -HUP "$pid"
	rm -f "$mnt/ram"
	res=$dir/res.$sz
	: >"$res"
	for r in $(seq "$RUNS"); do
		row=''
		for c in "${CONFIGS[@]}"; do
			case $c in
			lazy)	  qemu "$c" - touch "$(memfd '')" ;;
			prealloc) qemu "$c" - touch "$(memfd ,prealloc=on)" ;;
			floor-lazy | floor-prealloc)
				# Every page allocated (and zeroed) untimed.
				rm -f "$mnt/floor"
				fallocate -l "${mb}M" "$mnt/floor" ||
				    say "$sz: fallocate of the floor file failed"
				if [ "$c" = floor-lazy ]; then
					qemu "$c" - touch "$(floorb '')"
				else
					qemu "$c" - touch "$(floorb ,prealloc=on)"
				fi
				rm -f "$mnt/floor" ;;
			pool-lazy | pool-prealloc)
				pool_wait || bad=$((bad + 1))
				h0=$(pool_field handouts)
				if [ "$c" = pool-lazy ]; then
					qemu "$c" '' touch "$(memfd '')"
				else
					qemu "$c" '' touch "$(memfd ,prealloc=on)"
				fi
				# The registration check does not apply: a pool
				# file is left to the kernel; its hand-out does.
				if [ "$(pool_field handouts)" != $((h0 + 1)) ]; then
					say "$sz: $c: no pool file was handed out"
					ok=0
				fi ;;
			hpz-lazy) qemu "$c" nopool touch "$(memfd '')" ;;
			hpz-eager) qemu "$c" nopool,eager,premap touch "$(memfd '')" ;;
			recycled-hpz)
				# Fill the file with the last guest's data, untimed.
				qemu fill - fill "$(fileb)"
				[ "$ok" = 1 ] || bad=$((bad + 1))
				qemu "$c" discard,premap touch "$(fileb)" ;;
			recycled-kernel)
				# shellcheck disable=SC2016  # sh expands them
				qemu "$c" - touch "$(fileb)" \
				    sh -c 'rm -f "$1" && fallocate -l "$2" "$1"' sh \
				    "$mnt/ram" "${mb}M" ;;
			esac
			timed=$((timed + 1))
			[ "$ok" = 1 ] || bad=$((bad + 1))
			say "$sz round $r/$RUNS: ${LABEL[$c]}: $secs s${touched:+, $touched pages touched}, $free0 huge pages free before$([ "$ok" = 1 ] || echo ', FAILED')"
			row="$row $secs"
		done
		echo "$row" >>"$res"
	done
	tpages=${touched:-?}
	# Untimed: the recycled file again, checking every word, not one a page.
	say "$sz: every word of a recycled file under hpz-run discard,premap (untimed)"
	qemu fill - fill "$(fileb)"
	[ "$ok" = 1 ] || bad=$((bad + 1))
	qemu recycled-full discard,premap full "$(fileb)"
	[ "$ok" = 1 ] || bad=$((bad + 1))
	rm -f "$mnt/ram"
	pool_conf 0
	kill -HUP "$pid"
	sleep 0.2
	hp_release
	echo
	echo "size $sz ($pages x 2 MiB pages), $RUNS rounds, TCG guest touching $tpages 4 KiB pages"
	printf '%-38s %8s  %-13s  %6s  %6s\n' config "median s" "(min-max)" "x lazy" "x pre"
	i=0
	for c in "${CONFIGS[@]}"; do
		i=$((i + 1))
		printf '%-38s %s\n' "${LABEL[$c]}" "$(summary $i 1 2 "$res")"
	done
	sizes_done=$((sizes_done + 1))
done

echo
total=$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }')
if [ "$bad" = 0 ] && [ "$PG" = 1g ]; then
	echo "verified: $timed timed runs in $sizes_done size(s), and every warm-up:" \
	    "each QEMU exited 1 (the guest read zero in every page touched), each pool-full run got a pool file ($total s)"
elif [ "$bad" = 0 ]; then
	echo "verified: $timed timed runs in $sizes_done size(s), and every warm-up and fill:" \
	    "each QEMU exited 1 (the guest read zero in every page), each hpz-run run registered with hpzerod;" \
	    "a recycled file under hpz-run read zero in every word ($total s)"
else
	echo "verified: FAILED: $bad of the runs went wrong (see stderr) ($total s)"
fi
# A clean stop.
hpzd_stop "$pid" vmstart: >&2 || bad=$((bad + 1))
pid=
hpzd_errors "$dir/hpzerod.log" >&2
[ "$bad" = 0 ]
