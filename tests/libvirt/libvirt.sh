#!/bin/bash
# libvirt.sh - a libvirt guest under hpzerod, the way hpz-libvirt(7) says
# to set it up: this build installed (make install into a scratch root,
# bound over its prefix, /usr/local by default), a domain whose <emulator>
# is the installed hpz-qemu wrapper, guest RAM in 2 MiB huge pages from a
# shared memfd, and a real libvirtd 9 (Debian's libvirt-daemon-system) with
# its defaults:
# QEMU runs as libvirt-qemu, in libvirt's private /dev and device cgroup.
# The operator's additions are made in a private mount namespace, so the
# host is not changed: group hpz with libvirt-qemu in it (/etc/group),
# hpzerod's socket in that group, /dev/userfaultfd in that group and in
# qemu.conf's cgroup_device_acl, a hugetlbfs mount for libvirt.  libvirtd,
# virtlogd and hpzerod are started by hand (no systemd here).
#
# It checks that libvirt's capability probing accepts the wrapper, then
# virsh define, start (the guest reads its RAM zero, then writes and
# checks a pattern), that hpzerod registered QEMU's RAM for uid libvirt-qemu (fresh RAM: left to the kernel),
# destroy, start again, destroy, undefine; then with hpzerod's pool on,
# libvirt's prealloc left as it is (no HPZ_QEMU_PREALLOC=off): QEMU's RAM
# is a pool file, twice.  Exit 77 (skip) where libvirt,
# QEMU or a mount namespace cannot run.
set -u
: "${HPZ_SRCDIR:?run from make check}" "${HPZ_BUILDDIR:?run from make check}"
S=$HPZ_SRCDIR
B=$HPZ_BUILDDIR
MEM_MB=256
PLAIN_MB=128	# a plain guest, larger than the pool's reserve (16M)
PLAIN=hpz-libvirt-plain
BOUND=120	# seconds: "did not hang", not a timing claim
DOMAIN=hpz-libvirt-test

skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }

if [ -z "${HPZ_LIBVIRT_NS:-}" ]; then
	[ "$(id -u)" = 0 ] || skip "needs root (libvirtd, mounts, huge pages)"
	for c in libvirtd virtlogd virsh; do
		command -v $c >/dev/null 2>&1 ||
			skip "$c not found (Debian: libvirt-daemon-system libvirt-clients)"
	done
	command -v qemu-system-x86_64 >/dev/null 2>&1 ||
		skip "qemu-system-x86_64 not found (Debian: qemu-system-x86)"
	command -v unshare >/dev/null 2>&1 || skip "unshare(1) not found"
	command -v ldconfig >/dev/null 2>&1 || skip "ldconfig not found"
	# As qemu.sh: the plain build's preload goes into QEMU.
	if grep -q '^SAN_CFLAGS = -fsanitize' "$B/Makefile" 2>/dev/null; then
		skip "sanitizer build: the preload cannot be injected into QEMU (the plain build runs this)"
	fi
	getent passwd libvirt-qemu >/dev/null ||
		skip "no user libvirt-qemu (Debian's libvirt-daemon-system makes it)"
	[ -c /dev/userfaultfd ] || skip "no /dev/userfaultfd"
	[ -w /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages ] ||
		skip "no 2 MiB huge pages"
	unshare -m true 2>/dev/null || skip "cannot make a mount namespace"
	[ -e "$B/tests/qemu/qmp" ] || die "$B/tests/qemu/qmp not built"

	dir=$(mktemp -d /tmp/hpz-libvirt.XXXXXX) || exit 1
	chmod 0755 "$dir"
	. "$S/tests/hugepages.sh"
	# shellcheck disable=SC2317  # called by the trap
	outside_cleanup() { hp_release; rm -rf "$dir"; }
	trap outside_cleanup EXIT
	trap 'exit 130' INT TERM

	G=$dir/guest
	. "$S/tests/qemu/common.sh"
	guest_build
	rc=$?
	[ $rc != 0 ] && exit $rc
	# One install at a time: libtool relinks in the build tree (install.sh).
	if ! flock "${HPZ_INSTALL_LOCK:-/tmp/hpz-install.lock}" \
	    make -s -C "$B" install DESTDIR="$dir/root" >"$dir/install.log" 2>&1; then
		cat "$dir/install.log"; die "make install DESTDIR=$dir/root"
	fi
	# The prefix this build installs to; bound over it, the scratch root
	# must not hide the system's own programs.
	prefix=$(sed -n 's/^prefix=//p' "$B/lib/libhpz.pc")
	case "$prefix" in
	/|/usr|/usr/|"") skip "the build installs into $prefix: binding a scratch install over it would hide the system" ;;
	esac
	# A guest and a pool of one; then a plain guest beside them.
	hp_reserve_2m $((MEM_MB + 16 + PLAIN_MB / 2))
	free=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages)
	[ "$free" -ge $((MEM_MB / 2)) ] ||
		skip "only $free free 2 MiB huge pages, $((MEM_MB / 2)) needed"
	# libvirt (no systemd here) makes a "machine" cgroup in each
	# hierarchy and leaves it, empty: take away those it made.
	before=$(ls -d /sys/fs/cgroup/machine /sys/fs/cgroup/*/machine 2>/dev/null)
	# QEMU under TCG, libvirtd's start: heavy for 2 CPUs (see vmm.sh).
	hp_alone
	HPZ_LIBVIRT_NS=$dir HPZ_LIBVIRT_PREFIX=$prefix \
	    unshare -m --propagation private "$0" 8>&-
	rc=$?
	for cg in $(ls -d /sys/fs/cgroup/machine /sys/fs/cgroup/*/machine 2>/dev/null); do
		case " $(echo $before) " in *" $cg "*) ;; *) rmdir "$cg" 2>/dev/null ;; esac
	done
	exit $rc
fi

# --- inside the private mount namespace --------------------------------------
dir=$HPZ_LIBVIRT_NS
pids=()
qpid=''
# shellcheck disable=SC2317  # called by the trap
cleanup() {
	local p
	local d
	for d in $DOMAIN $PLAIN; do
		if [ -S /run/libvirt/libvirt-sock ]; then
			virsh -q destroy $d >/dev/null 2>&1
			virsh -q undefine $d >/dev/null 2>&1
		fi
		# A QEMU libvirt left behind (libvirtd killed first): by its pid.
		if [ -s /run/libvirt/qemu/$d.pid ]; then
			qpid=$(cat /run/libvirt/qemu/$d.pid)
			kill "$qpid" 2>/dev/null
		fi
	done
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# What an operator installs: this build, at its prefix.
prefix=$HPZ_LIBVIRT_PREFIX
# installed PATTERN: where make install put the file (without the root).
installed() {
	(cd "$dir/root" && find . -path "$1" | head -1 | sed 's/^\.//')
}
WRAPPER=$(installed "*/bin/hpz-qemu")
HPZCTL=$(installed "*/bin/hpzctl")
HPZEROD=$(installed "*/sbin/hpzerod")
LIBDIR=$(dirname "$(installed "*/libhpz.so.0")")
[ -n "$WRAPPER" ] && [ -n "$HPZCTL" ] && [ -n "$HPZEROD" ] && [ "$LIBDIR" != . ] ||
	die "make install did not install hpz-qemu, hpzctl, hpzerod and libhpz.so.0"
mkdir -p "$prefix" && mount --bind "$dir/root$prefix" "$prefix" || die "bind $prefix"
ldconfig -C "$dir/ld.so.cache" "$LIBDIR" && mount --bind "$dir/ld.so.cache" /etc/ld.so.cache ||
	die "ld.so.cache for $LIBDIR"
# libvirt's state, private: /run, /var/{lib,cache,log}/libvirt, /etc/libvirt.
mount -t tmpfs -o mode=0755 tmpfs /run || die "tmpfs on /run"
mkdir -p /run/libvirt /run/hpzerod
for d in /etc/libvirt /var/lib/libvirt /var/cache/libvirt /var/log/libvirt; do
	copy=$dir/state${d//\//_}
	cp -a "$d" "$copy" && mount --bind "$copy" "$d" || die "private $d"
done
rm -f /etc/libvirt/qemu/networks/autostart/*.xml

# Group hpz, with libvirt-qemu in it: the operator's usermod -aG hpz.
gid=$(getent group hpz | cut -d: -f3)
cp /etc/group "$dir/group"
if [ -z "$gid" ]; then
	for gid in $(seq 64900 64999); do getent group "$gid" >/dev/null || break; done
	echo "hpz:x:$gid:libvirt-qemu" >>"$dir/group"
else
	sed -i "s/^hpz:\([^:]*\):\([0-9]*\):\(.*\)$/hpz:\1:\2:\3,libvirt-qemu/; s/^hpz:\([^:]*\):\([0-9]*\):,/hpz:\1:\2:/" "$dir/group"
fi
mount --bind "$dir/group" /etc/group || die "bind /etc/group"

# /dev/userfaultfd usable by group hpz: the operator's udev rule.
mkdir "$dir/dev" && mount -t tmpfs -o mode=0755 tmpfs "$dir/dev" || die "tmpfs for a device node"
ufd=$(stat -c '%t %T' /dev/userfaultfd)
# shellcheck disable=SC2086
mknod "$dir/dev/userfaultfd" c $((0x${ufd% *})) $((0x${ufd#* })) &&
	chgrp hpz "$dir/dev/userfaultfd" && chmod 0660 "$dir/dev/userfaultfd" &&
	mount --bind "$dir/dev/userfaultfd" /dev/userfaultfd || die "/dev/userfaultfd for group hpz"

# A hugetlbfs mount for libvirt's <hugepages/>.
mkdir "$dir/hugepages" && mount -t hugetlbfs -o pagesize=2M none "$dir/hugepages" ||
	skip "cannot mount hugetlbfs"

# qemu.conf: the device in QEMU's private /dev and device cgroup.
cat >>/etc/libvirt/qemu.conf <<EOF
# hpz-libvirt(7)
cgroup_device_acl = [ "/dev/null", "/dev/full", "/dev/zero",
    "/dev/random", "/dev/urandom", "/dev/ptmx", "/dev/kvm",
    "/dev/userfaultfd" ]
hugetlbfs_mount = "$dir/hugepages"
EOF

# hpzerod on its default socket, which group hpz may use (hpzerod.socket).
# The pool off at first (the cycles without it), on for the last.
pool_conf() {
	printf '[pool]\nenable = %s\nsize_2m = %sM\nreserve_2m = 16M\nsize_1g = 0\n%s\n' \
	    "$1" "$MEM_MB" "uid_share = 0 ; every guest is libvirt-qemu's" \
	    >"$dir/hpzerod.conf"
}
pool_conf no
"$HPZEROD" --config "$dir/hpzerod.conf" --socket /run/hpzerod/hpzerod.sock \
    --workers 2 2>"$dir/hpzerod.log" &
dpid=$!
pids+=($dpid)
for _ in $(seq 400); do [ -S /run/hpzerod/hpzerod.sock ] && break; sleep 0.05; done
[ -S /run/hpzerod/hpzerod.sock ] || { cat "$dir/hpzerod.log"; die "hpzerod did not start"; }
chgrp hpz /run/hpzerod /run/hpzerod/hpzerod.sock &&
	chmod 0750 /run/hpzerod && chmod 0660 /run/hpzerod/hpzerod.sock || die "socket for group hpz"

virtlogd 2>"$dir/virtlogd.log" &
pids+=($!)
libvirtd 2>"$dir/libvirtd.log" &
lpid=$!
pids+=($lpid)
for _ in $(seq 600); do [ -S /run/libvirt/libvirt-sock ] && break; sleep 0.05; done
[ -S /run/libvirt/libvirt-sock ] || { tail -20 "$dir/libvirtd.log"; die "libvirtd did not start"; }
export LIBVIRT_DEFAULT_URI=qemu:///system

passed=0 failed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
fail() {
	echo "FAIL: $*"
	echo "  --- QEMU's log ---"
	tail -15 /var/log/libvirt/qemu/$DOMAIN.log 2>/dev/null | sed 's/^/  /'
	echo "  --- guest ---"
	tr -d '\r' <"$dir/serial.log" 2>/dev/null | grep -a '^guest:' | tail -5 | sed 's/^/  /'
	echo "  --- libvirtd (errors) ---"
	grep -i error "$dir/libvirtd.log" | tail -8 | sed 's/^/  /'
	failed=$((failed + 1))
}

# 1. libvirt's capability probing runs the wrapper.
if virsh -q domcapabilities --emulatorbin "$WRAPPER" \
    --virttype qemu --arch x86_64 --machine pc >"$dir/domcaps.xml" 2>"$dir/domcaps.err" &&
    grep -q "<path>$WRAPPER</path>" "$dir/domcaps.xml" &&
    grep -q "memory-backend-memfd\|<value>memfd</value>" "$dir/domcaps.xml"; then
	pass "capabilities: libvirt probed $WRAPPER"
else
	cat "$dir/domcaps.err"
	fail "capabilities: libvirt did not accept $WRAPPER"
fi

cp "$dir/guest/guest.elf" "$dir/guest.elf"
# domain_xml LAZY: the domain; LAZY=1 asks hpz-qemu for RAM on first touch.
domain_xml() {
	cat <<EOF
<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>$DOMAIN</name>
  <memory unit='MiB'>$MEM_MB</memory>
  <memoryBacking>
    <hugepages/>
    <source type='memfd'/>
    <access mode='shared'/>
  </memoryBacking>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$dir/guest.elf</kernel>
    <cmdline>wait</cmdline>
  </os>
  <on_poweroff>destroy</on_poweroff>
  <devices>
    <emulator>$WRAPPER</emulator>
    <serial type='file'>
      <source path='$dir/serial.log'/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
  <qemu:commandline>
    <qemu:arg value='-device'/>
    <qemu:arg value='isa-debug-exit,iobase=0xf4,iosize=4'/>
    <qemu:env name='HPZ_RUN_VERBOSE' value='1'/>
$([ "$1" = 1 ] && echo "    <qemu:env name='HPZ_QEMU_PREALLOC' value='off'/>")
  </qemu:commandline>
</domain>
EOF
}

# prom NAME: the sum of hpzctl prometheus' series NAME (any labels).
prom() {
	"$HPZCTL" -s /run/hpzerod/hpzerod.sock prometheus |
	    awk -v n="hpzerod_$1" '{ k = $1; sub(/\{.*/, "", k) }
	    k == n { s += $2; seen = 1 } END { if (seen) print s }'
}
FILLED='^guest: filled [1-9][0-9]* pages, 0 non-zero words, pattern ok$'
quid=$(id -u libvirt-qemu)

# boot NAME LAZY: start the domain, the guest checks its RAM, destroy it.
# Preallocated (libvirt's way with huge pages), QEMU touches every page at
# start and hpzerod serves each; lazy, only what the guest touches.
boot() {
	local n=$1 lazy=$2 f0 f1 list why= pages=$((MEM_MB / 2))
	rm -f "$dir/serial.log"
	f0=$(prom faults_total)
	if ! virsh -q start $DOMAIN >"$dir/start.out" 2>&1; then
		why="virsh start: $(cat "$dir/start.out")"
	fi
	if [ -z "$why" ]; then
		for _ in $(seq $((BOUND * 10))); do
			tr -d '\r' <"$dir/serial.log" 2>/dev/null |
			    grep -aq 'waiting for a byte' && break
			sleep 0.1
		done
		if ! tr -d '\r' <"$dir/serial.log" 2>/dev/null | grep -aqE "$FILLED"; then
			why="the guest did not read its RAM zero and keep a pattern"
		fi
	fi
	if [ -z "$why" ]; then
		f1=$(prom faults_total)
		list=$("$HPZCTL" -s /run/hpzerod/hpzerod.sock prometheus 2>&1)
		if ! grep -q "hpz-run: \[[0-9]*\] registered $MEM_MB MiB" \
		    /var/log/libvirt/qemu/$DOMAIN.log; then
			why="hpz-run registered no $MEM_MB MiB of guest RAM (QEMU's log)"
		elif [ -z "$f0" ] || [ -z "$f1" ] || [ "$f1" != "$f0" ]; then
			# Fresh RAM holds no garbage: the kernel's faults.
			why="hpzerod served faults of fresh guest RAM (faults ${f0:-?} -> ${f1:-?})"
		elif ! echo "$list" | grep -q "uid=\"$quid\""; then
			why="no region of uid $quid (libvirt-qemu) in hpzctl prometheus"
		elif [ "$lazy" = 1 ] && ! grep -q 'hpz-qemu: HPZ_QEMU_PREALLOC=off: .*"prealloc":false' \
		    /var/log/libvirt/qemu/$DOMAIN.log; then
			why="hpz-qemu did not turn prealloc off"
		fi
	fi
	if ! virsh -q destroy $DOMAIN >"$dir/destroy.out" 2>&1 && [ -z "$why" ]; then
		why="virsh destroy: $(cat "$dir/destroy.out")"
	fi
	if [ -n "$why" ]; then
		fail "start $n: $why"
	else
		pass "$n: guest RAM read zero; registered for libvirt-qemu, $pages pages left to the kernel; destroyed"
	fi
}

# cycle LAZY START...: define, boot each, undefine; nothing left behind.
cycle() {
	local lazy=$1 n
	shift
	domain_xml "$lazy" >"$dir/domain.xml"
	if ! virsh -q define "$dir/domain.xml" >"$dir/define.out" 2>&1; then
		fail "virsh define: $(cat "$dir/define.out")"
		return
	fi
	pass "define ($([ "$lazy" = 1 ] && echo "HPZ_QEMU_PREALLOC=off" || echo "libvirt preallocates"))"
	for n; do boot "$n" "$lazy"; done
	virsh -q undefine $DOMAIN >/dev/null 2>&1 || fail "undefine"
	# Once destroyed, nothing of the guest stays registered.
	for _ in $(seq 100); do [ "$(prom regions)" = 0 ] && break; sleep 0.1; done
	[ "$(prom regions)" = 0 ] || fail "regions left in hpzerod: $(prom regions)"
}
cycle 1 "lazy start 1" "lazy start 2"
cycle 0 "preallocated start"

# With the pool on, libvirt's prealloc as it is (no HPZ_QEMU_PREALLOC):
# QEMU's RAM is a pool file, every page already allocated and zero.
pool_conf yes
kill -HUP "$dpid"
pool_full() {
	local r
	for _ in $(seq 200); do
		r=$(prom pool_ready_pages)
		[ "${r:-0}" -ge $((MEM_MB / 2)) ] && return 0
		sleep 0.05
	done
	return 1
}
boot_pool() {
	local n=$1 h0 h1 why= t0 t1 l0
	rm -f "$dir/serial.log"
	pool_full || why="the pool holds $(prom pool_ready_pages) pages after 10 s, not $((MEM_MB / 2))"
	h0=$(prom pool_handouts_total)
	# QEMU's log keeps the earlier starts: this one's lines only.
	l0=$(wc -l </var/log/libvirt/qemu/$DOMAIN.log 2>/dev/null || echo 0)
	t0=$(date +%s%N)
	if [ -z "$why" ] && ! virsh -q start $DOMAIN >"$dir/start.out" 2>&1; then
		why="virsh start: $(cat "$dir/start.out")"
	fi
	if [ -z "$why" ]; then
		for _ in $(seq $((BOUND * 10))); do
			tr -d '\r' <"$dir/serial.log" 2>/dev/null |
			    grep -aq 'waiting for a byte' && break
			sleep 0.1
		done
		t1=$(date +%s%N)
		h1=$(prom pool_handouts_total)
		if ! tr -d '\r' <"$dir/serial.log" 2>/dev/null | grep -aqE "$FILLED"; then
			why="the guest did not read its RAM zero and keep a pattern"
		elif [ "$((h1 - h0))" != 1 ]; then
			why="no pool file handed out (handouts $h0 -> $h1)"
		elif ! tail -n +$((l0 + 1)) /var/log/libvirt/qemu/$DOMAIN.log |
		    grep -q "memfd '[^']*' (fd [0-9]*): a pool file, $MEM_MB MiB"; then
			why="QEMU's RAM is no $MEM_MB MiB pool file (QEMU's log)"
		elif tail -n +$((l0 + 1)) /var/log/libvirt/qemu/$DOMAIN.log |
		    grep -q 'HPZ_QEMU_PREALLOC=off'; then
			why="prealloc was turned off"
		fi
	fi
	if ! virsh -q destroy $DOMAIN >"$dir/destroy.out" 2>&1 && [ -z "$why" ]; then
		why="virsh destroy: $(cat "$dir/destroy.out")"
	fi
	if [ -n "$why" ]; then
		fail "start $n: $why"
	else
		pass "$n: libvirt preallocates, QEMU's RAM is a $MEM_MB MiB pool file, read zero; up in $(( (t1 - t0) / 1000000 )) ms; destroyed"
	fi
}
domain_xml 0 >"$dir/domain.xml"
if virsh -q define "$dir/domain.xml" >"$dir/define.out" 2>&1; then
	boot_pool "pool start 1"
	boot_pool "pool start 2"
	virsh -q undefine $DOMAIN >/dev/null 2>&1 || fail "undefine"
else
	fail "virsh define: $(cat "$dir/define.out")"
fi

# --- a plain guest beside the full default pool (issue 33) ------------------
# The default pool: every free page above the reserve.  A guest that does
# not use hpzerod (QEMU itself as <emulator>, RAM on libvirt's hugetlbfs
# mount, preallocated) needs its pages free as it starts: without the hook
# the kernel has only the reserve for it and QEMU fails; with the hook
# (installed as the package does) hpzctl reserve has the pool give them
# back first.  An hpz-qemu guest then still starts beside it on a pool file.
printf '[pool]\nenable = yes\nreserve_2m = 16M\nsize_1g = 0\nuid_share = 0\n' \
    >"$dir/hpzerod.conf"
kill -HUP "$dpid"
H2=/sys/kernel/mm/hugepages/hugepages-2048kB
host_free() { echo $(($(cat $H2/free_hugepages) - $(cat $H2/resv_hugepages))); }
# pool_default_full: the pool holds every free page but the reserve (8).
pool_default_full() {
	for _ in $(seq 400); do
		[ "$(host_free)" -le 8 ] && [ "$(prom pool_ready_pages)" -ge $((PLAIN_MB / 2)) ] &&
		    return 0
		sleep 0.05
	done
	return 1
}
plain_xml() {
	cat <<EOF
<domain type='qemu'>
  <name>$PLAIN</name>
  <memory unit='MiB'>$PLAIN_MB</memory>
  <memoryBacking>
    <hugepages/>
  </memoryBacking>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$dir/guest.elf</kernel>
    <cmdline>wait</cmdline>
  </os>
  <on_poweroff>destroy</on_poweroff>
  <devices>
    <emulator>$(command -v qemu-system-x86_64)</emulator>
    <serial type='file'>
      <source path='$dir/serial-plain.log'/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
EOF
}
# plain_start: start the plain guest; 0 once it read its RAM zero and
# keeps a pattern, else 1 with the reason in $why.
plain_start() {
	local t0 t1
	why=
	rm -f "$dir/serial-plain.log"
	t0=$(date +%s%N)
	if ! virsh -q start $PLAIN >"$dir/plain.out" 2>&1; then
		why=$(tr '\n' ' ' <"$dir/plain.out")
		return 1
	fi
	for _ in $(seq $((BOUND * 10))); do
		tr -d '\r' <"$dir/serial-plain.log" 2>/dev/null |
		    grep -aq 'waiting for a byte' && break
		sleep 0.1
	done
	t1=$(date +%s%N)
	plain_ms=$(( (t1 - t0) / 1000000 ))
	tr -d '\r' <"$dir/serial-plain.log" 2>/dev/null | grep -aqE "$FILLED" && return 0
	why="the plain guest did not read its RAM zero and keep a pattern"
	return 1
}
# Where make install put the hook (its sysconfdir, under the scratch root).
HOOK=$(installed "*/libvirt/hooks/qemu.d/hpzerod")
plain_xml >"$dir/plain.xml"
if [ -z "$HOOK" ]; then
	fail "make install did not install the libvirt hook"
elif ! virsh -q define "$dir/plain.xml" >"$dir/define.out" 2>&1; then
	fail "virsh define $PLAIN: $(cat "$dir/define.out")"
elif ! pool_default_full; then
	fail "the default pool did not fill: host $(host_free) free, pool $(prom pool_ready_pages) ready"
else
	# Without the hook: the pool holds the pages the guest needs.
	if plain_start; then
		virsh -q destroy $PLAIN >/dev/null 2>&1
		fail "without the hook a plain $PLAIN_MB MiB guest started beside the full pool (nothing shown)"
	else
		pass "without the hook: a plain $PLAIN_MB MiB guest fails beside the full pool (reserve 16 MiB): $why"
	fi
	# The hook, where the package installs it; libvirtd finds it on a
	# reload (SIGHUP), as the package's postinst makes it.
	mkdir -p /etc/libvirt/hooks/qemu.d
	cp "$dir/root$HOOK" /etc/libvirt/hooks/qemu.d/hpzerod
	kill -HUP "$lpid"
	sleep 2
	pool_default_full || fail "the default pool did not fill again"
	y0=$(prom pool_yielded_pages_total)
	if plain_start; then
		y1=$(prom pool_yielded_pages_total)
		pass "with the hook: the plain $PLAIN_MB MiB guest starts beside the full pool (up in $plain_ms ms; the pool gave back $((y1 - y0)) pages), RAM read zero"
		# An hpz-qemu guest beside it, from the pool.
		if virsh -q define "$dir/domain.xml" >"$dir/define.out" 2>&1; then
			boot_pool "beside a plain guest"
			virsh -q undefine $DOMAIN >/dev/null 2>&1 || fail "undefine"
		else
			fail "virsh define: $(cat "$dir/define.out")"
		fi
		virsh -q destroy $PLAIN >/dev/null 2>&1 || fail "virsh destroy $PLAIN"
	else
		fail "with the hook: the plain guest did not start: $why"
		grep -i hook "$dir/libvirtd.log" | tail -5 | sed 's/^/  /'
	fi
	virsh -q undefine $PLAIN >/dev/null 2>&1 || fail "undefine $PLAIN"
fi

kill -0 "$dpid" 2>/dev/null || fail "hpzerod died"
echo "libvirt: $passed passed, $failed failed"
[ $failed -ne 0 ] && exit 1
exit 0
