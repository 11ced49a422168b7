#!/bin/bash
# quickstart.sh - the README's two commands.
#
#   tests/quickstart.sh demo    install what is missing, build, run hpzerod
#                               on a temporary socket and the demo client
#   tests/quickstart.sh check   install what is missing, build, run the
#                               whole test suite (make check)
#
# Builds out of tree in ./build.  Needs root (apt-get, the huge page pool,
# userfaultfd); re-runs itself with sudo when it is not root.  Every change
# to the huge page pool is put back on exit.
set -euo pipefail

what=${1:-}
case "$what" in
demo|check) ;;
*) echo "usage: $0 demo|check [configure options...]" >&2; exit 2 ;;
esac
shift

top=$(cd "$(dirname "$0")/.." && pwd)
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null; then
		exec sudo -E "$0" "$what" "$@"
	fi
	echo "quickstart: run as root (apt-get, huge pages, userfaultfd)" >&2
	exit 1
fi

step() { printf '\n==> %s\n' "$*"; }

# Debian packages: toolchain and the libraries hpzerod uses.
pkgs="build-essential autoconf automake libtool pkg-config libevent-dev
libnuma-dev libsystemd-dev libcriterion-dev libjson-c-dev libinih-dev mandoc
systemd systemd-container clang libclang-rt-14-dev qemu-system-x86 cpio"
missing=
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing="$missing $p"
done
# libvirt for tests/libvirt/libvirt.sh, without its recommends (dnsmasq,
# firewall, more QEMU drivers): the test needs libvirtd and virsh only.
pkgs_norec="libvirt-daemon-system libvirt-clients"
missing_norec=
for p in $pkgs_norec; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing_norec="$missing_norec $p"
done
if [ -n "$missing$missing_norec" ]; then
	step "installing:$missing$missing_norec"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	[ -n "$missing" ] && apt-get install -y -qq $missing >/dev/null
	[ -n "$missing_norec" ] &&
		apt-get install -y -qq --no-install-recommends $missing_norec >/dev/null
fi

cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
	step "generating the build system (autoreconf)"
	autoreconf -fi >/dev/null
fi

# build DIR [configure options]: configure once, then make.
build() {
	local dir=$1
	shift
	step "building in $top/$dir${*:+ ($*)}"
	mkdir -p "$top/$dir"
	cd "$top/$dir"
	if [ ! -f Makefile ] || [ "$(cat .quickstart-args 2>/dev/null)" != "$*" ]; then
		../configure -q "$@"
		echo "$*" > .quickstart-args
	fi
	make -s -j"$(nproc)" >/dev/null
}

pass=0 fail=0 skip=0
# check DIR: make check there and add up criterion's summaries.
check() {
	local dir=$1 rc=0 log line t p s
	cd "$top/$dir"
	step "running the test suite in $dir (make check)"
	make -s -j"$(nproc)" check || rc=$?
	step "results in $dir"
	for log in tests/unit/*.log tests/integration/*.log tests/systemd/*.log \
	    tests/qemu/*.log tests/libvirt/*.log \
	    tests/*.log; do
		[ -f "$log" ] || continue
		echo "--- ${log%.log}"
		if grep -q 'Synthesis:' "$log"; then
			grep '\[SKIP\]\|\[FAIL\]' "$log" | sed 's/^/    /' || true
			line=$(grep 'Synthesis:' "$log" | tail -1)
			echo "$line"
			t=$(sed -n 's/.*Tested: \([0-9]*\).*/\1/p' <<<"$line")
			p=$(sed -n 's/.*Passing: \([0-9]*\).*/\1/p' <<<"$line")
			s=$(grep -c '\[SKIP\]' "$log" || true)
			pass=$((pass + p)); fail=$((fail + t - p)); skip=$((skip + s))
		else
			tail -1 "$log"
		fi
	done
	if [ "$rc" != 0 ]; then
		echo "make check failed in $dir; the failing logs:"
		tail -80 test-suite.log 2>/dev/null
		fail=$((fail + 1))
	fi
	return 0
}

build build "$@"
if [ "$what" = check ]; then
	check build
	# The same suite under AddressSanitizer and UBSan.
	build build-asan --enable-asan
	check build-asan
	# The release tarball builds, installs and passes from a clean tree.
	step "make distcheck in build"
	cd "$top/build"
	if ! HPZ_FUZZ_SECONDS=0 make -s distcheck >distcheck.log 2>&1; then
		tail -60 distcheck.log
		echo "make distcheck failed; see build/distcheck.log"
		# The tarball's own build stays behind on failure: name what failed.
		find hpzerod-*/_build -name '*.log' -path '*tests*' 2>/dev/null |
		    xargs -r grep -l '\[FAIL\]\|^FAIL' 2>/dev/null | while read -r log; do
			echo "--- $log"
			grep -B8 '\[FAIL\]\|^FAIL' "$log" | grep -v '^\[RUN \]\|^\[PASS\]' | tail -60
		done
		fail=$((fail + 1))
	else
		grep -A2 'archives ready' distcheck.log
	fi
	echo
	echo "criterion: $pass passed, $fail failed, $skip skipped"
	[ "$fail" = 0 ]
	exit
fi
cd "$top/build"

# demo: a daemon on a temporary socket and the demo client against it.
step "reserving huge pages"
. "$top/tests/hugepages.sh"
. "$top/tests/hpzd.sh"
hpzd_scratch demo
size_mib=${HPZ_DEMO_MIB:-512}
# Two regions' worth, and one more for hpzerod's pre-zeroed pool.
hp_reserve_2m $((3 * size_mib / 2 + 24))
echo "2 MiB pages free: $(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages)" \
	"($((3 * size_mib / 2 + 24)) added; taken away again on exit)"

step "starting hpzerod on $dir/hpzerod.sock"
# The pool holds one demo region; by default it keeps 2G free for other
# programs, more than the pages reserved here (hpzerod.conf(5)).
printf '[pool]\nsize_2m = %sM\nreserve_2m = 16M\nsize_1g = 0\n' "$size_mib" >"$dir/hpzerod.conf"
./daemon/hpzerod --config "$dir/hpzerod.conf" --socket "$dir/hpzerod.sock" \
    2>"$dir/hpzerod.log" &
pid=$!
for _ in $(seq 100); do [ -S "$dir/hpzerod.sock" ] && break; sleep 0.05; done
[ -S "$dir/hpzerod.sock" ] || { cat "$dir/hpzerod.log"; exit 1; }

step "hpz-demo: ${size_mib} MiB, 2 threads, hpzerod against the kernel"
rc=0
./client/hpz-demo -s "$dir/hpzerod.sock" -S "${size_mib}M" -t 2 || rc=$?
step "hpzctl status"
./client/hpzctl -s "$dir/hpzerod.sock" status || rc=$?
step "hpzerod log"
cat "$dir/hpzerod.log"
exit "$rc"
