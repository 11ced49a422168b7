#!/bin/bash
# numa.sh - hpzerod on two NUMA nodes, which this machine need not have: a
# QEMU guest (TCG) with two nodes of one CPU each boots Debian's cloud
# kernel and an initramfs holding this build's hpzerod, hpzctl and
# tests/numa/numa-client with their shared libraries, and a static /init
# (tests/numa/init.c) that runs them.  The client checks, in the guest, that
# each node's pool holds pages of that node, that the pool's fillers, the
# fault workers and the background threads are bound to their node, and
# that a client bound to node 1 gets node-1 pages in its regions: from the
# pool, from faults the daemon serves, from the background's allocation
# ahead.  The kernel is apt-get download'ed once (the package that
# linux-image-cloud-amd64 depends on) and kept in HPZ_NUMA_CACHE (default
# /var/cache/hpzerod-tests, else the build tree); HPZ_NUMA_KERNEL names a
# kernel to use instead.  Exit 77 (skip) when the machine cannot run it.
set -u
: "${HPZ_SRCDIR:?run from make check}" "${HPZ_BUILDDIR:?run from make check}"
S=$HPZ_SRCDIR
B=$HPZ_BUILDDIR
QEMU=${HPZ_QEMU:-qemu-system-x86_64}
TIMEOUT_S=${HPZ_NUMA_TIMEOUT:-170}
# Known failures: "check-name reason" lines; such a check's FAIL is
# reported and does not fail the test (none today).
KNOWN=''

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

for t in "$QEMU" cpio gzip timeout ldd; do
	command -v "$t" >/dev/null 2>&1 ||
		skip "$t not found (Debian: qemu-system-x86, cpio, gzip, coreutils, libc-bin)"
done
CC=${CC:-cc}
command -v "$CC" >/dev/null 2>&1 || skip "no C compiler ($CC) for the guest's /init"
for f in daemon/hpzerod tests/numa/numa-client; do
	[ -x "$B/$f" ] || fail "$B/$f not built"
done
# hpzctl is a libtool wrapper until installed: the program is in .libs.
ctl=$B/client/.libs/hpzctl
[ -x "$ctl" ] || ctl=$B/client/hpzctl
[ -x "$ctl" ] || fail "$B/client/hpzctl not built"

dir=$(mktemp -d /tmp/hpz-numa.XXXXXX)
qpid=''
# shellcheck disable=SC2317  # called by the trap
cleanup() {
	[ -n "$qpid" ] && kill "$qpid" 2>/dev/null && wait "$qpid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the kernel -------------------------------------------------------------
# kernel_get: the path of a vmlinuz with NUMA, userfaultfd and hugetlbfs
# built in, on stdout; a reason on stderr and 1 when there is none.
kernel_get() {
	local cache pkg deb
	if [ -n "${HPZ_NUMA_KERNEL:-}" ]; then
		[ -r "$HPZ_NUMA_KERNEL" ] || { echo "HPZ_NUMA_KERNEL=$HPZ_NUMA_KERNEL cannot be read" >&2; return 1; }
		echo "$HPZ_NUMA_KERNEL"; return 0
	fi
	cache=${HPZ_NUMA_CACHE:-/var/cache/hpzerod-tests}
	if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
		cache=$B/tests/numa/cache
		mkdir -p "$cache" || return 1
	fi
	pkg=''
	command -v apt-cache >/dev/null 2>&1 &&
		pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
		    awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
	if [ -z "$pkg" ]; then
		# No apt (or no such package here): a kernel fetched before.
		# shellcheck disable=SC2012  # names we made
		deb=$(ls "$cache"/vmlinuz-* 2>/dev/null | tail -n 1)
		[ -n "$deb" ] && { echo "$deb"; return 0; }
		echo "apt-cache knows no linux-image-cloud-amd64 and $cache holds no kernel" >&2
		return 1
	fi
	if [ ! -s "$cache/vmlinuz-$pkg" ]; then
		(
			set -e
			cd "$dir"
			flock "$cache/.lock" true
			apt-get download "$pkg" >apt.log 2>&1 ||
			    { cat apt.log >&2; exit 1; }
			dpkg-deb -x ./"$pkg"_*.deb deb
			# shellcheck disable=SC2086  # one file
			cp deb/boot/vmlinuz-* "$cache/.vmlinuz-$pkg.$$"
			cp deb/boot/config-* "$cache/config-$pkg" 2>/dev/null || true
			mv "$cache/.vmlinuz-$pkg.$$" "$cache/vmlinuz-$pkg"
			rm -rf deb ./*.deb
		) || { echo "cannot fetch $pkg (apt-get download, dpkg-deb -x)" >&2; return 1; }
	fi
	# Modules would have to go into the initramfs: want them built in.
	if [ -r "$cache/config-$pkg" ]; then
		for o in NUMA USERFAULTFD HUGETLBFS SERIAL_8250_CONSOLE BLK_DEV_INITRD RD_GZIP DEVTMPFS; do
			grep -q "^CONFIG_$o=y" "$cache/config-$pkg" ||
			    { echo "$pkg: CONFIG_$o is not built in" >&2; return 1; }
		done
	fi
	echo "$cache/vmlinuz-$pkg"
}
kernel=$(kernel_get 2>"$dir/kernel.why") || skip "no guest kernel: $(cat "$dir/kernel.why")"
echo "numa: kernel $kernel"

# --- the initramfs ----------------------------------------------------------
root=$dir/root
mkdir -p "$root"/{hpz/lib,etc,dev,proc,sys,tmp,run,bin} || exit 1
"$CC" -static -O2 -o "$root/init" "$S/tests/numa/init.c" 2>"$dir/cc.log" ||
	skip "cannot link a static /init (Debian: libc6-dev): $(head -n 3 "$dir/cc.log")"
cp "$B/daemon/hpzerod" "$ctl" "$B/tests/numa/numa-client" "$root/hpz/" || exit 1
[ "$(basename "$ctl")" = hpzctl ] || fail "unexpected hpzctl at $ctl"
# Their libraries, as ldd finds them for the build tree (the loader too).
libpath=$B/lib/.libs:$B/client/.libs
for f in "$root"/hpz/hpzerod "$root"/hpz/hpzctl "$root"/hpz/numa-client; do
	LD_LIBRARY_PATH=$libpath ldd "$f" >"$dir/ldd.out" 2>&1 ||
		fail "ldd $f: $(cat "$dir/ldd.out")"
	if grep -q 'not found' "$dir/ldd.out"; then
		fail "ldd $f: $(grep 'not found' "$dir/ldd.out")"
	fi
	awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' \
	    "$dir/ldd.out" >>"$dir/libs"
done
sort -u "$dir/libs" | while read -r lib; do
	case $lib in
	*/ld-linux*)
		mkdir -p "$root$(dirname "$lib")" &&
		    cp -L "$lib" "$root$lib" ;;
	*)	cp -L "$lib" "$root/hpz/lib/" ;;
	esac
done || exit 1
cat >"$root/etc/hpzerod.conf" <<'EOF'
# tests/numa/numa.sh: one worker a CPU, a pool of 2 MiB pages on each node.
[daemon]
workers = 0
[policy]
intercept = always
step_aside = never
[pool]
enable = yes
size_2m = 0:32M,1:32M
size_1g = 0
reserve_2m = 0
EOF
(cd "$root" && find . | cpio -o -H newc --quiet) | gzip -1 >"$dir/initrd.gz" ||
	fail "cannot make the initramfs"
echo "numa: initramfs of $(du -k "$dir/initrd.gz" | cut -f1) KiB"

# --- the guest --------------------------------------------------------------
. "$S/tests/hugepages.sh"
hp_alone	# 2 CPUs of TCG: the heavy tests' lock
serial=$dir/serial.log
# Each node keeps a few hundred MiB beside its huge pages: a client bound
# to a node takes all its memory there, and the sanitizer build's
# processes are big (CI's ASan run once had the daemon killed for memory
# with 256 MiB on node 1, 128 of them huge pages).
timeout "$TIMEOUT_S" "$QEMU" -accel tcg -cpu max -smp 2 -m 1088M \
	-object memory-backend-ram,id=m0,size=576M \
	-object memory-backend-ram,id=m1,size=512M \
	-numa node,nodeid=0,memdev=m0,cpus=0 \
	-numa node,nodeid=1,memdev=m1,cpus=1 \
	-nic none -display none -monitor none -no-reboot \
	-serial "file:$serial" \
	-kernel "$kernel" -initrd "$dir/initrd.gz" \
	-append "console=ttyS0 panic=-1 loglevel=4 hugepagesz=2M hugepages=0:56,1:64" \
	</dev/null >"$dir/qemu.log" 2>&1 8>&- &
qpid=$!
wait "$qpid"
rc=$?
qpid=''

# The whole console stays in the build tree, for a failure's details.
cp "$serial" "$B/tests/numa/serial.log" 2>/dev/null
grep -a '^NUMA ' "$serial" | tr -d '\r'
if [ "$rc" = 124 ]; then
	echo "--- serial (last 40 lines) ---"; tail -n 40 "$serial"
	fail "the guest did not power off within $TIMEOUT_S s"
fi
[ "$rc" = 0 ] || { cat "$dir/qemu.log"; tail -n 40 "$serial"; fail "QEMU exited $rc"; }
grep -aq '^NUMA end rc' "$serial" || { tail -n 60 "$serial"; fail "the guest's /init did not finish"; }
if grep -aqE 'ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:' "$serial"; then
	sed -n '/--- hpzerod log ---/,/--- end of log ---/p' "$serial"
	fail "sanitizer report in the guest"
fi
grep -aq '^NUMA daemon exit 0' "$serial" || {
	sed -n '/--- hpzerod log ---/,/--- end of log ---/p' "$serial"
	fail "hpzerod did not exit 0 on SIGTERM in the guest"
}

passed=0 failed=0 known=0
while read -r verdict name; do
	name=${name%%:*}
	if [ "$verdict" = PASS ]; then
		passed=$((passed + 1))
		continue
	fi
	why=$(printf '%s\n' "$KNOWN" | awk -v n="$name" '$1 == n { $1 = ""; print substr($0, 2) }')
	if [ -n "$why" ]; then
		echo "KNOWN FAILURE: $name: $why"
		known=$((known + 1))
	else
		failed=$((failed + 1))
	fi
done < <(grep -a '^NUMA \(PASS\|FAIL\) ' "$serial" | tr -d '\r' | cut -d' ' -f2-)
echo "numa: $passed passed, $failed failed, $known known failures"
if [ "$failed" != 0 ] || [ "$passed" = 0 ]; then
	sed -n '/--- hpzerod log ---/,/--- end of log ---/p' "$serial"
	exit 1
fi
exit 0
