#!/bin/bash
# uffd.sh - the kernel's own mm selftests as a peer suite: uffd-unit-tests,
# uffd-stress (hugetlb, hugetlb-private, shmem, shmem-private) and the
# hugetlb tests (hugepage-mmap, -shm, -mremap, -vmemmap, hugetlb-madvise,
# hugetlb_dio), built from a Debian linux-source package, each run three
# ways: plain, under hpz-run with a pool of this script's own hpzerod, and
# under hpz-run -f nopool.  hpz-run(1) promises the program sees the memory
# it would see without it, its own userfaultfd included: any difference in
# verdict (exit status; uffd-unit-tests' line for each of its tests) fails.
#
# The source is /usr/src/linux-source-*.tar.xz (Debian: linux-source-6.12);
# what the tests need of it is extracted and built once into
# HPZ_KSELFTEST_CACHE (default: the build tree's kselftest-cache), again
# when the tarball, the compiler or this recipe changes.  Nothing of the
# kernel is kept in this tree.  Exit 77 (skip) without the source, root,
# userfaultfd or huge pages.  HPZ_KSELFTEST_KEEP=1 keeps each run's output.
# About 45 s on two CPUs with a cold cache (15 s of it the build), 30 s
# warm.
set -u
: "${HPZ_SRCDIR:?run from make check}" "${HPZ_BUILDDIR:?run from make check}"
S=$HPZ_SRCDIR
B=$HPZ_BUILDDIR
CACHE=${HPZ_KSELFTEST_CACHE:-$B/kselftest-cache}
CC=${CC:-gcc}
# hpz-run's smallest mapping: with the default (64M) the areas of
# uffd-unit-tests (32 MiB), hugepage-mremap (10) and hugetlb-madvise (20)
# would not be registered.
MIN=${HPZ_KSELFTEST_MIN:-2M}
STRESS_MB=128		# uffd-stress: area (MiB) and bounces
BOUNCES=8
POOL_MB=256		# the daemon's pool, a fixed size (see below)
# Pool, the largest test (hugepage-mmap, -shm: 256 MiB; uffd-stress: two
# areas of STRESS_MB) and hugetlb-madvise's minimum of 20 free.
PAGES=$((POOL_MB / 2 + 128 + 32))
RECIPE=1		# bump when the build below changes: rebuilds the cache

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

FREE=/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages
[ "$(id -u)" = 0 ] || skip "needs root (huge page pool, /proc/self/pagemap, userfaultfd)"
[ -e /dev/userfaultfd ] || [ -e /proc/sys/vm/unprivileged_userfaultfd ] ||
	skip "the kernel has no userfaultfd"
[ -w /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages ] ||
	skip "no 2 MiB huge pages"
[ "$(awk '/^Hugepagesize:/ { print $2 }' /proc/meminfo)" = 2048 ] ||
	skip "the default huge page size is not 2 MiB (the tests use the default)"
# An instrumented preload cannot go into the uninstrumented tests.
grep -q '^SAN_CFLAGS = -fsanitize' "$B/Makefile" 2>/dev/null &&
	skip "sanitizer build: the preload cannot be injected into the selftests (the plain build runs this)"
for t in "$CC" tar xz timeout flock; do
	command -v "$t" >/dev/null 2>&1 || skip "$t not found"
done
# HPZ_KSELFTEST_SRC names another tarball (its top directory named as it).
tarball=${HPZ_KSELFTEST_SRC:-$(find /usr/src -maxdepth 1 -name 'linux-source-*.tar.xz' | sort -V | tail -1)}
[ -n "$tarball" ] ||
	skip "no kernel source (/usr/src/linux-source-*.tar.xz; Debian: apt-get install linux-source-6.12)"
[ -r "$tarball" ] || skip "cannot read the kernel source $tarball"
for f in daemon/hpzerod client/hpz-run client/hpzctl client/.libs/libhpz-preload.so; do
	[ -e "$B/$f" ] || fail "$B/$f not built"
done

# --- build ------------------------------------------------------------------
# The tests in the order they run: NAME and command line (in $CACHE/bin).
TESTS="uffd-unit-tests|uffd-unit-tests
uffd-stress-hugetlb|uffd-stress hugetlb $STRESS_MB $BOUNCES
uffd-stress-hugetlb-private|uffd-stress hugetlb-private $STRESS_MB $BOUNCES
uffd-stress-shmem|uffd-stress shmem $STRESS_MB $BOUNCES
uffd-stress-shmem-private|uffd-stress shmem-private $STRESS_MB $BOUNCES
hugepage-mmap|hugepage-mmap
hugepage-shm|hugepage-shm
hugepage-mremap|hugepage-mremap
hugetlb-madvise|hugetlb-madvise
hugepage-vmemmap|hugepage-vmemmap
hugetlb_dio|hugetlb_dio"
# The uffd programs must build; a hugetlb one that does not (another kernel
# version) is listed as not built.
MUST="uffd-unit-tests uffd-stress"
PROGS="$MUST hugepage-mmap hugepage-shm hugepage-mremap hugetlb-madvise
hugepage-vmemmap hugetlb_dio"

# ks_extract TOP: the files the tests need, into $CACHE/src (one pass over
# the tarball: xz decompresses the whole stream whatever is asked).
ks_extract() {
	local top=$1 m=$1/tools/testing/selftests/mm
	rm -rf "${CACHE:?}/src" "${CACHE:?}/uapi" "${CACHE:?}/bin"
	mkdir -p "$CACHE/src" "$CACHE/uapi/linux" "$CACHE/bin" || return 1
	tar -xJf "$tarball" -C "$CACHE/src" --wildcards \
	    "$top/tools/testing/selftests/kselftest.h" \
	    "$m/uffd-*" "$m/vm_util.*" "$m/thp_settings.*" "$m/hugepage-*.c" \
	    "$m/hugetlb-madvise.c" "$m/hugetlb_dio.c" "$top/mm/gup_test.h" \
	    "$top/include/uapi/linux/userfaultfd.h" \
	    "$top/tools/include/uapi/linux/fs.h" || return 1
	# The system's uapi headers (bookworm: 6.1) lack what these tests use
	# (UFFDIO_MOVE, UFFDIO_POISON, PAGEMAP_SCAN): the two headers that
	# define it, made usable as headers_install would (__packed is the
	# kernel's; tools/include's fs.h is already a user-space copy).
	# Cheaper than headers_install, which wants most of the tree.
	sed 's/\<__packed\>/__attribute__((packed))/g' \
	    "$CACHE/src/$top/include/uapi/linux/userfaultfd.h" \
	    >"$CACHE/uapi/linux/userfaultfd.h" &&
	cp "$CACHE/src/$top/tools/include/uapi/linux/fs.h" "$CACHE/uapi/linux/"
}

# ks_compile TOP PROG: PROG from the selftests' sources, as their Makefile
# builds it (vm_util.c and thp_settings.c in each, uffd-common.c in the
# uffd ones), log in $CACHE/build.log.
ks_compile() {
	local top=$CACHE/src/$1 prog=$2 extra=
	case $prog in uffd-*) extra=uffd-common.c ;; esac
	(cd "$top/tools/testing/selftests/mm" &&
	    "$CC" -O2 -U_FORTIFY_SOURCE -isystem "$CACHE/uapi" -I "$top" \
	    -o "$CACHE/bin/$prog" "$prog.c" $extra vm_util.c thp_settings.c \
	    -lrt -lpthread -lm) >>"$CACHE/build.log" 2>&1
}

# ks_build: $CACHE/bin up to date with the tarball, the compiler and
# RECIPE; the programs that did not build are in $CACHE/failed.
ks_build() {
	local top stamp p n
	top=$(basename "$tarball" .tar.xz)
	stamp="$RECIPE $(basename "$tarball") $(stat -c '%s %Y' "$tarball") $("$CC" -dumpfullversion 2>/dev/null)"
	[ "$(cat "$CACHE/stamp" 2>/dev/null)" = "$stamp" ] && return 0
	rm -f "$CACHE/stamp" "$CACHE/failed" "$CACHE/build.log"
	echo "kselftest: extracting $top's mm selftests into $CACHE"
	ks_extract "$top" || { echo "kselftest: extracting from $tarball failed"; return 1; }
	echo "kselftest: building $PROGS" | tr '\n' ' '; echo
	n=0
	for p in $PROGS; do
		ks_compile "$top" "$p" &
		# Two at a time: the machine may have two CPUs.
		n=$((n + 1))
		[ $((n % 2)) = 0 ] && wait
	done
	wait
	for p in $PROGS; do
		[ -x "$CACHE/bin/$p" ] || echo "$p" >>"$CACHE/failed"
	done
	echo "$stamp" >"$CACHE/stamp"
}

t0=$(date +%s)
mkdir -p "$CACHE" || fail "cannot make $CACHE"
# One build at a time on a cache.
(flock 9; ks_build) 9>"$CACHE/lock" || fail "kselftest build failed"
for p in $MUST; do
	if grep -qx "$p" "$CACHE/failed" 2>/dev/null; then
		tail -30 "$CACHE/build.log"
		fail "$p did not build (log: $CACHE/build.log)"
	fi
done
echo "kselftest: built in $(( $(date +%s) - t0 )) s (cache $CACHE: $(cat "$CACHE/stamp"))"

# --- the daemon ---------------------------------------------------------------
. "$S/tests/hugepages.sh"
. "$S/tests/hpzd.sh"
# The tests load both CPUs and read the host's huge page counts
# (hugetlb-madvise asserts the exact free count): nobody else's daemon or
# pool beside them.
t1=$(date +%s)
hp_alone
t2=$(date +%s)
dir=$(mktemp -d /tmp/hpz-kselftest.XXXXXX)
pid='' shm_restore=''
# shellcheck disable=SC2317  # called by the trap
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	[ -n "$shm_restore" ] && eval "$shm_restore"
	hp_release
	if [ -n "${HPZ_KSELFTEST_KEEP:-}" ]; then
		echo "kselftest: outputs kept in $dir"
	else
		rm -rf "$dir"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

hp_reserve_2m "$PAGES"
[ "$(cat "$FREE")" -ge "$PAGES" ] ||
	skip "only $(cat "$FREE") free 2 MiB huge pages, $PAGES needed"
# hugepage-shm maps 256 MiB of SysV shared memory (as run_vmtests.sh sets;
# a limit beyond bash's integers, the kernel's default, fails the test
# quietly: large enough).
if [ "$(cat /proc/sys/kernel/shmmax)" -lt 268435456 ] 2>/dev/null ||
    [ "$(cat /proc/sys/kernel/shmall)" -lt 65536 ] 2>/dev/null; then
	shm_restore="echo $(cat /proc/sys/kernel/shmmax) >/proc/sys/kernel/shmmax;
	    echo $(cat /proc/sys/kernel/shmall) >/proc/sys/kernel/shmall"
	echo 268435456 >/proc/sys/kernel/shmmax
	echo 4194304 >/proc/sys/kernel/shmall
fi

# A pool of a fixed size with no reserve: once full it holds still, so the
# host's free count moves only with what the test itself does.  A pool that
# follows the host (size_2m = all, the default) takes and gives back pages
# as the host's count moves, and hugetlb-madvise, which asserts that count,
# fails beside it with or without hpz-run: that is the pool's design, not
# the program's memory.
sock=$dir/hpzerod.sock
cat >"$dir/hpzerod.conf" <<EOF
[pool]
size_2m = ${POOL_MB}M
reserve_2m = 0
size_1g = 0
; every test runs as root, one uid
uid_share = 0
EOF
"$B/daemon/hpzerod" --config "$dir/hpzerod.conf" --socket "$sock" \
    --workers 2 2>"$dir/hpzerod.log" 8>&- &
pid=$!
hpzd_wait_socket "$sock" "$dir/hpzerod.log" || exit 1
# A copy of the preload, taken while no install relinks it in place.
flock "${HPZ_INSTALL_LOCK:-/tmp/hpz-install.lock}" \
    cp "$B/client/.libs/libhpz-preload.so" "$dir/libhpz-preload.so" ||
	fail "cannot copy the preload library"
export HPZ_PRELOAD=$dir/libhpz-preload.so
unset HPZ_RUN_FLAGS HPZ_RUN_MIN HPZ_NO_POOL HPZ_RUN_VERBOSE

# pool_counter NAME: one counter of the 2 MiB pool (hpzctl stats --json).
pool_counter() {
	"$B/client/hpzctl" -s "$sock" stats --json |
	    awk -v k="\"$1\"" '/"pools"/ { p = 1 } p && index($0, k) {
		gsub(/[^0-9]/, "", $NF); print $NF; exit }'
}

# pool_full: wait (a liveness bound) until the pool holds all its pages.
pool_full() {
	local r
	for _ in $(seq 400); do
		r=$(pool_counter ready_pages)
		[ "${r:-0}" -ge $((POOL_MB / 2)) ] && return 0
		sleep 0.05
	done
	echo "kselftest: the pool holds ${r:-?} pages after 20 s, not $((POOL_MB / 2))"
	return 1
}

# --- the runs -------------------------------------------------------------------
SETUPS="plain pool nopool"

# run_one NAME SETUP CMD...: its verdict (pass, skip, fail:RC, timeout) in
# $dir/NAME.SETUP.v, its standard output in .out (hpz-run -v writes its
# lines to standard error, .err), its run time in ms added to ms_SETUP.
run_one() {
	local name=$1 setup=$2 prog=$CACHE/bin/$3 rc v t
	shift 3
	local out=$dir/$name.$setup.out
	# The host's free count holds still only while the pool is full
	# (hugetlb-madvise asserts it); the others need not wait for it.
	[ "$name" = hugetlb-madvise ] && { pool_full || true; }
	t=$(date +%s%N)
	case $setup in
	plain) timeout 120 "$prog" "$@" ;;
	pool) timeout 120 "$B/client/hpz-run" -v -s "$sock" -m "$MIN" -- \
	    "$prog" "$@" ;;
	nopool) timeout 120 "$B/client/hpz-run" -v -s "$sock" -m "$MIN" \
	    -f nopool -- "$prog" "$@" ;;
	esac </dev/null >"$out" 2>"${out%.out}.err" 8>&-
	rc=$?
	eval "ms_$setup=\$((ms_$setup + ($(date +%s%N) - t) / 1000000))"
	case $rc in
	0) v=pass ;;
	4) v=skip ;;		# KSFT_SKIP
	124) v=timeout ;;
	*) v=fail:$rc ;;
	esac
	echo "$v" >"$dir/$name.$setup.v"
}

# unit_lines OUT: uffd-unit-tests' verdict of each test ("TEST: done",
# "skipped", "failed", or "none" when the program ended in it).
unit_lines() {
	awk '/^Testing / {
		s = $0; sub(/^Testing /, "", s); i = index(s, "... ")
		if (i) { r = substr(s, i + 4); s = substr(s, 1, i - 1)
			sub(/ .*/, "", r) } else { sub(/\.\.\.$/, "", s); r = "none" }
		print s ": " r }' "$1"
}

h0=$(pool_counter handouts)
ms_plain=0 ms_pool=0 ms_nopool=0
handouts_pool=0 handouts_nopool=0
failed=0 compared=0 notbuilt=''
while IFS='|' read -r name cmd; do
	prog=${cmd%% *}
	if grep -qx "$prog" "$CACHE/failed" 2>/dev/null; then
		notbuilt="$notbuilt $name"
		continue
	fi
	for s in $SETUPS; do
		a=$(pool_counter handouts)
		# shellcheck disable=SC2086  # the command line's words
		run_one "$name" "$s" $cmd
		b=$(pool_counter handouts)
		case $s in
		pool) handouts_pool=$((handouts_pool + b - a)) ;;
		nopool) handouts_nopool=$((handouts_nopool + b - a)) ;;
		esac
	done
	compared=$((compared + 1))
	ref=$(cat "$dir/$name.plain.v")
	for s in pool nopool; do
		v=$(cat "$dir/$name.$s.v")
		if [ "$v" != "$ref" ]; then
			echo "FAIL: $name: $ref plain, $v under hpz-run ($s)"
			echo "--- $name, plain:"
			tail -15 "$dir/$name.plain.out" "$dir/$name.plain.err"
			echo "--- $name, $s:"
			tail -15 "$dir/$name.$s.out" "$dir/$name.$s.err"
			failed=$((failed + 1))
		fi
		[ "$name" = uffd-unit-tests ] || continue
		if ! diff <(unit_lines "$dir/$name.plain.out") \
		    <(unit_lines "$dir/$name.$s.out") >"$dir/unit.$s.diff"; then
			echo "FAIL: uffd-unit-tests: tests whose verdict differs (< plain, > $s):"
			grep '^[<>]' "$dir/unit.$s.diff"
			failed=$((failed + 1))
		fi
	done
done <<<"$TESTS"

# --- the verdicts -------------------------------------------------------------------
# work ERR: what hpz-run -v says it did in a run (pool files taken,
# mappings registered, ranges handed over to the program's userfaultfd).
work() {
	awk '/: a pool file, / { p++ } /] registered / { r++ }
	    / over to the program.s userfaultfd/ { h++ }
	    END { printf "%d pool, %d reg, %d handed", p, r, h }' "$1"
}
echo
printf '%-28s %-8s %-8s %-8s %s\n' test plain pool nopool \
    'hpz-run in the pool run (-v)'
while IFS='|' read -r name cmd; do
	[ -f "$dir/$name.plain.v" ] || continue
	printf '%-28s %-8s %-8s %-8s %s\n' "$name" "$(cat "$dir/$name.plain.v")" \
	    "$(cat "$dir/$name.pool.v")" "$(cat "$dir/$name.nopool.v")" \
	    "$(work "$dir/$name.pool.err")"
done <<<"$TESTS"
for s in $SETUPS; do
	[ -f "$dir/uffd-unit-tests.$s.out" ] &&
	    echo "uffd-unit-tests, $s: $(grep -a 'Userfaults unit tests:' "$dir/uffd-unit-tests.$s.out" | tail -1)"
done
echo "run time: $((ms_plain / 1000)) s plain, $((ms_pool / 1000)) s under hpz-run, $((ms_nopool / 1000)) s with -f nopool"
[ -n "$notbuilt" ] && echo "not built (not compared):$notbuilt (log: $CACHE/build.log)"
echo "pool files handed out: $handouts_pool under hpz-run, $handouts_nopool with -f nopool (daemon's total $h0 -> $(pool_counter handouts))"
# hpz-run must have been at work: the uffd tests' hugetlb memfds are
# sized with ftruncate, which takes a pool file.
if [ "$handouts_pool" -lt 1 ]; then
	echo "FAIL: no pool file was handed out under hpz-run: the comparison proves nothing"
	failed=$((failed + 1))
fi
if [ "$handouts_nopool" -ne 0 ]; then
	echo "FAIL: -f nopool took $handouts_nopool pool files"
	failed=$((failed + 1))
fi
if ! kill -0 "$pid" 2>/dev/null; then
	echo "FAIL: hpzerod died"
	failed=$((failed + 1))
	pid=
else
	hpzd_stop "$pid" FAIL: || failed=$((failed + 1))
	pid=
fi
hpzd_errors "$dir/hpzerod.log"
echo "kselftest: $compared tests compared in 3 setups, $failed differences or failures, $(( $(date +%s) - t0 - t2 + t1 )) s in all (build $((t1 - t0)) s; $((t2 - t1)) s more waiting for the other heavy tests)"
[ "$failed" -ne 0 ] && exit 1
exit 0
