#!/bin/bash
#
# package.sh - the Debian package, built and lived with under a real
# systemd: dpkg-buildpackage -b of version N (this tree) and N+1 (the same
# with a changelog entry more), lintian on N, then in a container of the
# host (systemd-nspawn --volatile=yes, with /usr and /var as overlays on the
# host's, so that dpkg writes there and the host stays as it was):
#   install   dpkg -i of hpzerod, libhpz0, libhpz-dev: group hpz made, the
#             socket enabled and listening (root:hpz 0660), the service not
#             started until a client comes; a uid in group hpz runs hpz-demo
#             against /run/hpzerod/hpzerod.sock, and a QEMU guest (the
#             test guest of tests/qemu, TCG) started with the installed
#             hpz-qemu reads its RAM zero, served by the installed daemon
#   upgrade   dpkg -i of N+1: the running daemon restarted (new MainPID),
#             the socket still there, hpz-demo still served; through it a
#             client (upgrade-client.c, built in the container against the
#             installed libhpz-dev) holds data and garbage pages and keeps
#             touching and resetting some; after the restart another
#             process takes every free huge page, and the client must read
#             its data, zero where it had garbage, and get no SIGBUS; its
#             longest stall (one round) is printed, with the journal's
#             timing of the restart it waited for
#   fd store  what this systemd keeps in a service's fd store across
#             restart, SIGKILL and stop/start (fdstore-probe.c): printed
#
# HPZ_UPGRADE_PUNCH=1 registers the client's region with HPZ_RELEASE_HOLES
# (its garbage punched when the daemon lets go, the way before keep.c): the
# upgrade check must then fail, and does (the client's first read of a
# punched page never returns while another process holds every free page).
#   remove    dpkg -r: socket and service stopped, the socket file gone,
#             /etc/hpzerod.conf kept
#   purge     dpkg -P: /etc/hpzerod.conf and the enablement links gone
#
# Not in make check (two package builds and a container: a few minutes);
# .ci/run calls it after tests/quickstart.sh check.  Needs root,
# dpkg-buildpackage with debhelper, systemd-nspawn and 2 MiB huge pages;
# exit 77 (skip) where one is missing.  Every huge page reserved and every
# cgroup made is put back on exit.

set -u

srcdir=$(cd "${HPZ_SRCDIR:-$(dirname "$0")/../..}" && pwd)
pages=${HPZ_PACKAGE_PAGES:-96}	# the demo's 2 x 64 MiB, the pool's 16 MiB, slack
CLIENT_UID=4242
SOCK=/run/hpzerod/hpzerod.sock

skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }

[ "$(id -u)" = 0 ] || skip "needs root"
for t in dpkg-buildpackage dh dh_autoreconf systemd-nspawn nsenter setpriv \
    git; do
	command -v $t >/dev/null 2>&1 || skip "$t is not installed"
done
[ -d "$srcdir/debian" ] || die "no debian/ in $srcdir"
[ -d /sys/kernel/mm/hugepages/hugepages-2048kB ] || skip "no 2 MiB huge pages"

name=hpz-pkg-$$
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hpz-package.XXXXXX") || exit 1
. "$srcdir/tests/hugepages.sh"
nspawn=
pid1=
cgdirs=
failed=0

cleanup() {
	local d
	[ -n "$pid1" ] && kill -KILL "$pid1" 2>/dev/null
	if [ -n "$nspawn" ]; then
		kill -TERM "$nspawn" 2>/dev/null
		for _ in $(seq 50); do
			kill -0 "$nspawn" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$nspawn" 2>/dev/null
		wait "$nspawn" 2>/dev/null
	fi
	for d in $cgdirs; do
		for _ in $(seq 30); do
			[ -d "$d" ] || break
			find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
			sleep 0.1
		done
		[ -d "$d" ] && echo "note: could not remove $d"
	done
	hp_release
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

check() {
	if eval "$2"; then
		echo "ok   $1"
	else
		echo "FAIL $1"
		failed=$((failed + 1))
	fi
}

# --- build N and N+1 ------------------------------------------------------
# From the files git knows (tracked, and new ones not ignored): what a
# clean checkout builds, without this tree's build/ or configure output.
copy_tree() {
	mkdir -p "$1"
	(cd "$srcdir" && git ls-files -z --cached --others --exclude-standard |
	    xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
	    tar --null -T - -cf -) | tar -xf - -C "$1"
}
# build DIR: dpkg-buildpackage -b there, its log in DIR.log.
build() {
	(cd "$1" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" \
	    dpkg-buildpackage -b -us -uc) >"$1.log" 2>&1 || {
		tail -40 "$1.log"
		die "dpkg-buildpackage in $1"
	}
}
copy_tree "$tmp/n/hpzerod" || die "cannot copy the tree"
ver=$(cd "$tmp/n/hpzerod" && dpkg-parsechangelog -S Version)
t0=$SECONDS
build "$tmp/n/hpzerod"
echo "ok   dpkg-buildpackage -b -us -uc of $ver took $((SECONDS - t0)) s"

copy_tree "$tmp/n1/hpzerod" || die "cannot copy the tree"
ver1="$ver+pkgtest1"
{
	printf 'hpzerod (%s) unstable; urgency=medium\n\n' "$ver1"
	printf '  * Test build: version N+1 for tests/debian/package.sh.\n\n'
	printf ' -- hpzerod tests <tests@localhost>  %s\n\n' "$(date -R)"
	cat "$tmp/n/hpzerod/debian/changelog"
} >"$tmp/n1/hpzerod/debian/changelog"
t0=$SECONDS
build "$tmp/n1/hpzerod"
echo "ok   dpkg-buildpackage of $ver1 took $((SECONDS - t0)) s"

if command -v lintian >/dev/null 2>&1; then
	# lintian says it should not run as root.
	chmod -R a+rX "$tmp"
	lint=$(cd "$tmp/n" && setpriv --reuid=nobody --regid=nogroup \
	    --clear-groups lintian --pedantic -I ./*.changes 2>&1)
	echo "$lint" | sed 's/^/     lintian: /'
	check "lintian: no error, no warning" \
	    '! echo "$lint" | grep -q "^[EW]: "'
else
	echo "note: lintian is not installed, not run"
fi

# --- huge pages and the container -----------------------------------------
# Alone, like tests/systemd/nspawn.sh: a daemon of another test takes the
# free pages above its reserve, ours included.
t0=$SECONDS
hp_alone
echo "     waited $((SECONDS - t0)) s for the other heavy tests (hp_alone)"
t0=$SECONDS
hp_reserve_2m "$pages"
free=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages)
[ "$free" -ge 64 ] || skip "only $free huge pages free, need 64"

mkdir -p "$tmp/debs" "$tmp/usr" "$tmp/var"
cp "$tmp"/n/*.deb "$tmp"/n1/*.deb "$tmp/debs/"
cp "$srcdir/tests/debian/upgrade-client.c" \
    "$srcdir/tests/debian/fdstore-probe.c" "$tmp/debs/"
# The guest of tests/qemu, for a served guest under the installed hpz-qemu
# (QEMU from the host's /usr; none there or no -m32 compiler: not run).
guest=
if command -v qemu-system-x86_64 >/dev/null 2>&1; then
	S=$srcdir G=$tmp/guest
	. "$srcdir/tests/qemu/common.sh"
	if guest_build >"$tmp/guest.log" 2>&1; then
		cp "$GUEST" "$tmp/debs/guest.elf" && guest=/opt/debs/guest.elf
	else
		sed 's/^/     /' "$tmp/guest.log"
	fi
fi
launch() {
	local h
	for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified /sys/fs/cgroup; do
		[ -f "$h/cgroup.procs" ] || continue
		mkdir -p "$h/$name" 2>/dev/null && echo $BASHPID >"$h/$name/cgroup.procs" \
		    2>/dev/null || true
	done
	# /etc stays the container's own (a tmpfs systemd fills at boot): the
	# host's would start its services (libvirtd, a database) in there.
	exec systemd-nspawn -q -D / --volatile=yes --register=no --keep-unit \
	    -M "$name" --overlay=/usr:"$tmp/usr":/usr \
	    --overlay=/var:"$tmp/var":/var --bind-ro="$tmp/debs":/opt/debs \
	    --console=passive --boot -- systemd.firstboot=off
}
for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified /sys/fs/cgroup; do
	[ -f "$h/cgroup.procs" ] && cgdirs="$cgdirs $h/$name"
done
launch >"$tmp/nspawn.log" 2>&1 8>&- &
nspawn=$!

cin() {
	nsenter -t "$pid1" -a "$@"
}
state=
for _ in $(seq 300); do
	kill -0 "$nspawn" 2>/dev/null || break
	pid1=$(ps --ppid "$nspawn" -o pid= 2>/dev/null | tr -d ' ' | head -1)
	if [ -n "$pid1" ]; then
		state=$(cin systemctl is-system-running 2>/dev/null)
		case $state in running|degraded) break ;; esac
	fi
	sleep 0.1
done
case $state in
running|degraded) echo "container $name booted ($state, $((SECONDS - t0)) s)" ;;
*) cat "$tmp/nspawn.log"; skip "container did not boot (${state:-no answer})" ;;
esac

# What a Debian host has and this one's container lacks, changed in the
# overlays only: the host's policy-rc.d (a Docker image's, "exit 101")
# forbids every start from a maintainer script; the host's statoverrides
# name groups that the container's /etc has not; udev does not run in a
# container, so /dev/userfaultfd is made here and the installed rule's
# GROUP and MODE applied to it by hand, as udev would at boot.
cin rm -f /usr/sbin/policy-rc.d
cin sh -c ': >/var/lib/dpkg/statoverride'
cin mknod -m 600 /dev/userfaultfd c 10 257 || die "mknod /dev/userfaultfd"
# The host's pool is shared with other tests: this daemon's pool stays at
# 16 MiB (the default takes every free page above the reserve).  A drop-in
# with a settings file of its own, so that the package's conffile stays as
# shipped (an edited one would make the upgrade ask, and purge must find it).
cin mkdir -p /etc/systemd/system/hpzerod.service.d
printf '[pool]\nsize_2m = 16M\n' | cin tee /etc/hpzerod-test.conf >/dev/null
printf '[Service]\nExecStart=\nExecStart=/usr/sbin/hpzerod --config /etc/hpzerod-test.conf\n' |
    cin tee /etc/systemd/system/hpzerod.service.d/test.conf >/dev/null

show() {
	cin systemctl show -p "$1" --value "${2:-hpzerod.service}"
}
demo() {
	local gid
	gid=$(cin getent group hpz | cut -d: -f3)
	cin setpriv --reuid=$CLIENT_UID --regid=$CLIENT_UID --groups="$gid" \
	    hpz-demo -s $SOCK -S 64M -r 1 -t 1 >"$tmp/demo.out" 2>&1 8>&-
}

# --- the fd store of this systemd ------------------------------------------
# What the host's systemd keeps in a service's fd store when the service
# stops and starts again (a probe service that stores one memfd; systemd
# 254 made it a setting, FileDescriptorStorePreserve=, Debian 12 has 252).
# hpzerod does not count on it: a graceful exit takes its regions out of
# the store (fdstore_forget) after clearing their garbage in place, and
# libhpz registers them again with the next daemon; the store carries
# regions across a crash (Restart=on-failure).  Said, not checked: it is
# the host's systemd, not ours.
#
# probe WHAT COMMAND: run COMMAND, wait for a new instance of the probe.
probe() {
	local old
	old=$(show MainPID hpz-fdprobe.service)
	eval "$2" >/dev/null 2>&1
	for _ in $(seq 50); do
		[ "$(show SubState hpz-fdprobe.service)" = running ] &&
		    [ "$(show MainPID hpz-fdprobe.service)" != "$old" ] && break
		sleep 0.1
	done
	echo "     fd store: after $1: $(show NFileDescriptorStore \
	    hpz-fdprobe.service) fds held; $(cin tail -1 /run/fdprobe.log)"
}
if cin sh -c 'gcc -O2 -Wall -o /usr/local/bin/fdstore-probe \
    /opt/debs/fdstore-probe.c $(pkg-config --cflags --libs libsystemd)' \
    >"$tmp/cc.log" 2>&1; then
	printf '%s\n' '[Service]' Type=notify NotifyAccess=main \
	    FileDescriptorStoreMax=4 Restart=on-failure RestartSec=100ms \
	    'ExecStart=/usr/local/bin/fdstore-probe /run/fdprobe.log' |
	    cin tee /etc/systemd/system/hpz-fdprobe.service >/dev/null
	cin systemctl daemon-reload
	echo "     fd store: systemd $(cin systemctl --version | sed -n '1s/^systemd //p')"
	probe "start" 'cin systemctl start hpz-fdprobe.service'
	probe "systemctl restart" 'cin systemctl restart hpz-fdprobe.service'
	probe "SIGKILL (Restart=on-failure)" \
	    'cin systemctl kill -s KILL hpz-fdprobe.service'
	probe "systemctl stop, then start" 'cin systemctl stop \
	    hpz-fdprobe.service; cin systemctl start hpz-fdprobe.service'
	cin systemctl stop hpz-fdprobe.service
	cin rm -f /etc/systemd/system/hpz-fdprobe.service
	cin systemctl daemon-reload
else
	sed 's/^/     /' "$tmp/cc.log"
	echo "note: fdstore-probe.c did not build (libsystemd-dev?): not probed"
fi

# --- install ---------------------------------------------------------------
cd "$tmp/debs" || die "cd"
n_debs=$(ls hpzerod_"$ver"_*.deb libhpz0_"$ver"_*.deb libhpz-dev_"$ver"_*.deb)
n1_debs=$(ls hpzerod_"$ver1"_*.deb libhpz0_"$ver1"_*.deb libhpz-dev_"$ver1"_*.deb)
cd / || die "cd"
t0=$SECONDS
cin sh -c "cd /opt/debs && dpkg -i $(echo $n_debs)" >"$tmp/dpkg.log" 2>&1 ||
    { cat "$tmp/dpkg.log"; die "dpkg -i $ver"; }
echo "ok   dpkg -i $(echo $n_debs) ($((SECONDS - t0)) s)"
check "install: group hpz made" 'cin getent group hpz >/dev/null'
check "install: hpzerod.socket enabled" \
    '[ "$(cin systemctl is-enabled hpzerod.socket)" = enabled ]'
check "install: hpzerod.socket active" \
    '[ "$(show ActiveState hpzerod.socket)" = active ]'
check "install: $SOCK is root:hpz 660" \
    '[ "$(cin stat -c "%U:%G %a" $SOCK)" = "root:hpz 660" ]'
check "install: the service waits for its first client" \
    '[ "$(show ActiveState)" = inactive ]'
check "install: /etc/hpzerod.conf shipped as a conffile" \
    'cin test -f /etc/hpzerod.conf'
check "install: the libvirt hook /etc/libvirt/hooks/qemu.d/hpzerod, executable" \
    'cin test -x /etc/libvirt/hooks/qemu.d/hpzerod &&
    cin grep -qx /etc/libvirt/hooks/qemu.d/hpzerod /var/lib/dpkg/info/hpzerod.conffiles'
rule=$(cin cat /lib/udev/rules.d/60-hpzerod.rules | grep -v '^#')
ugroup=$(echo "$rule" | sed -n 's/.*GROUP="\([^"]*\)".*/\1/p')
umode=$(echo "$rule" | sed -n 's/.*MODE="\([^"]*\)".*/\1/p')
check "install: udev rule gives /dev/userfaultfd to group hpz ($ugroup $umode)" \
    '[ "$ugroup" = hpz ] && [ "$umode" = 0660 ] &&
    cin chgrp "$ugroup" /dev/userfaultfd && cin chmod "$umode" /dev/userfaultfd'
if demo; then
	echo "ok   install: uid $CLIENT_UID in group hpz runs hpz-demo -s $SOCK"
else
	echo "FAIL install: hpz-demo"
	failed=$((failed + 1))
fi
sed 's/^/     /' "$tmp/demo.out"
check "install: the socket started the service" \
    '[ "$(show ActiveState)" = active ]'

# guest: a QEMU guest of 64 MiB on 2 MiB huge pages, started by uid
# $CLIENT_UID (group hpz) with the installed hpz-qemu and nothing else
# set: it checks every page of its RAM reads zero, then writes and reads a
# pattern, and says so on its serial port; the daemon must have served it
# (a registration more).
served_guest() {
	local gid r0 r1 rc
	gid=$(cin getent group hpz | cut -d: -f3)
	r0=$(cin hpzctl stats --json | grep -o '"registers" *: *[0-9]*' |
	    grep -o '[0-9]*$')
	cin setpriv --reuid=$CLIENT_UID --regid=$CLIENT_UID --groups="$gid" \
	    timeout 120 hpz-qemu -accel tcg -m 64 -object \
	    memory-backend-memfd,id=m,size=64M,hugetlb=on,hugetlbsize=2M,share=on \
	    -machine pc,memory-backend=m -kernel "$guest" -nographic \
	    -nic none -serial stdio -monitor none \
	    -device isa-debug-exit,iobase=0xf4,iosize=4 </dev/null \
	    >"$tmp/guest.out" 2>"$tmp/guest.err" 8>&-
	rc=$?
	r1=$(cin hpzctl stats --json | grep -o '"registers" *: *[0-9]*' |
	    grep -o '[0-9]*$')
	grep -a '^guest:' "$tmp/guest.out" | tr -d '\r' | sed 's/^/     /'
	echo "     hpz-qemu exited $rc (1: the guest's success), registrations ${r0:-?} -> ${r1:-?}"
	[ "$rc" = 1 ] && grep -aqE '^guest: checked [1-9][0-9]* pages, 0 non-zero words, pattern ok' \
	    "$tmp/guest.out" && [ -n "$r0" ] && [ -n "$r1" ] && [ "$r1" -gt "$r0" ]
}
if [ -z "$guest" ]; then
	echo "note: no QEMU or no test guest here: the served guest not run"
elif served_guest; then
	echo "ok   install: a guest under the installed hpz-qemu, served, reads zero"
else
	echo "FAIL install: a guest under the installed hpz-qemu"
	sed 's/^/     | /' "$tmp/guest.err" | tail -20
	failed=$((failed + 1))
fi
pid_n=$(show MainPID)

# --- a client through the upgrade -------------------------------------------
# Built here against what libhpz-dev installed (gcc: cc is an alternative,
# whose link lives in the host's /etc, not the container's).  HPZ_UPGRADE_PUNCH=1 runs
# it with HPZ_RELEASE_HOLES (the daemon punches its garbage when it lets
# go, as before keep.c): the test must then fail, and says how.
uflags=
[ "${HPZ_UPGRADE_PUNCH:-0}" = 1 ] && uflags=-P
client=
cpid=
# wait_line FILE REGEX SECONDS: FILE has a line matching REGEX in time.
wait_line() {
	for _ in $(seq $(($3 * 10))); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
if cin sh -c 'gcc -O2 -Wall -o /usr/local/bin/upgrade-client \
    /opt/debs/upgrade-client.c $(pkg-config --cflags --libs libhpz)' \
    >"$tmp/cc.log" 2>&1; then
	echo "ok   upgrade-client built against the installed libhpz-dev"
	gid=$(cin getent group hpz | cut -d: -f3)
	cin setpriv --reuid=$CLIENT_UID --regid=$CLIENT_UID --groups="$gid" \
	    upgrade-client $uflags >"$tmp/client.out" 2>&1 8>&- &
	client=$!
	wait_line "$tmp/client.out" '^ready\|^upgrade-client:' 30
	if grep -q '^ready' "$tmp/client.out"; then
		cpid=$(sed -n 's/^pid //p' "$tmp/client.out")
		sed -n 's/^ready: /     client: /p' "$tmp/client.out"
	else
		cat "$tmp/client.out"
		echo "     2 MiB huge pages: $(cat /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages) in all, $(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages) free, $(cat /sys/kernel/mm/hugepages/hugepages-2048kB/resv_hugepages) reserved"
		echo "FAIL upgrade-client did not start"
		failed=$((failed + 1))
		client=
	fi
	# Rounds served by N before the upgrade.
	sleep 1
	echo "     fd store before the upgrade: $(show NFileDescriptorStore) fds"
else
	cat "$tmp/cc.log"
	echo "FAIL gcc upgrade-client.c against libhpz-dev"
	failed=$((failed + 1))
fi

# --- upgrade -----------------------------------------------------------------
t0=$SECONDS
cin sh -c "cd /opt/debs && dpkg -i $(echo $n1_debs)" >"$tmp/dpkg.log" 2>&1 ||
    { cat "$tmp/dpkg.log"; die "dpkg -i $ver1"; }
echo "ok   dpkg -i $(echo $n1_debs) ($((SECONDS - t0)) s)"
check "upgrade: hpzerod is $ver1" \
    '[ "$(cin dpkg-query -W -f="\${Version}" hpzerod)" = "$ver1" ]'
for _ in $(seq 100); do
	[ "$(show SubState)" = running ] && break
	sleep 0.1
done
pid_n1=$(show MainPID)
check "upgrade: the daemon was restarted (MainPID $pid_n -> $pid_n1)" \
    '[ "$(show SubState)" = running ] && [ "$pid_n1" != "$pid_n" ] &&
    [ "$pid_n1" != 0 ]'
check "upgrade: it exited on SIGTERM by itself (no stop timeout)" \
    '! cin journalctl -u hpzerod --no-pager -o cat | grep -q "stop-sigterm.* timed out"'
check "upgrade: the socket stayed active and enabled" \
    '[ "$(show ActiveState hpzerod.socket)" = active ] &&
    [ "$(cin systemctl is-enabled hpzerod.socket)" = enabled ]'
echo "     fd store after the upgrade: $(show NFileDescriptorStore) fds"
# The restart as the journal timed it (seconds since the container's boot):
# what the client's longest stall waited for.
cin journalctl -u hpzerod --no-pager -o short-monotonic |
    grep -E 'Terminated|cleared in place|not cleared within|stored region|adopt|: stopped$|Starting hpzerod|ready:' |
    sed -n '/Terminated/,$p' | sed 's/^\[ *\([0-9.]*\)\] [^:]*: /     journal \1: /'
if [ -n "$client" ]; then
	# Rounds served by N+1, then every free huge page taken; then the
	# client reads every page of its region.
	sleep 1
	cin upgrade-client hog >"$tmp/hog.out" 2>&1 8>&- &
	if wait_line "$tmp/hog.out" '^hog: took' 60; then
		sed 's/^/     /' "$tmp/hog.out"
	else
		cat "$tmp/hog.out"
		echo "FAIL the hog did not say what it took"
		failed=$((failed + 1))
	fi
	cin kill -USR1 "$cpid"
	for _ in $(seq 600); do
		kill -0 "$client" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$client" 2>/dev/null; then
		crc=timeout
		echo "     client: no answer 60 s after it was told to check its"
		echo "     pages (every free page taken): where its threads wait:"
		cin cat /proc/$cpid/stat | awk -v hz="$(getconf CLK_TCK)" \
		    '{ printf "       its CPU time: user %.1f s, system %.1f s\n",
		    $14 / hz, $15 / hz }'
		cin sh -c "for t in /proc/$cpid/task/*; do
		    echo \$t \$(cat \$t/wchan) \$(head -c 60 \$t/syscall); done" |
		    sed 's/^/       /'
	else
		wait "$client"
		crc=$?
	fi
	sed 's/^/     client: /' "$tmp/client.out" | grep -v '^     client: pid \|ready'
	check "upgrade: the client kept every page through the restart (exit $crc)" \
	    '[ "$crc" = 0 ]'
	stall=$(sed -n 's/.*longest stall \([0-9.]* ms ([^)]*)\).*/\1/p' "$tmp/client.out")
	echo "     longest client stall across the upgrade: ${stall:-?}"
	hpid=$(sed -n 's/^hog: pid //p' "$tmp/hog.out")
	[ -n "$hpid" ] && cin kill "$hpid"
	[ "$crc" = timeout ] && cin kill -KILL "$cpid"
	sleep 0.5
fi
if demo; then
	echo "ok   upgrade: hpz-demo still served"
else
	echo "FAIL upgrade: hpz-demo"
	failed=$((failed + 1))
fi
sed -n 's/^run 1\/1: /     /p; s/^verified: /     verified: /p' "$tmp/demo.out"
check "upgrade: the same daemon served it" '[ "$(show MainPID)" = "$pid_n1" ]'

# --- remove ------------------------------------------------------------------
cin dpkg -r hpzerod libhpz-dev libhpz0 >"$tmp/dpkg.log" 2>&1 ||
    { cat "$tmp/dpkg.log"; die "dpkg -r"; }
echo "ok   dpkg -r hpzerod libhpz-dev libhpz0"
check "remove: hpzerod.service stopped" \
    '[ "$(show ActiveState)" = inactive ]'
check "remove: hpzerod.socket stopped" \
    '[ "$(show ActiveState hpzerod.socket)" = inactive ]'
check "remove: $SOCK gone" '! cin test -e $SOCK'
check "remove: the daemon exited cleanly" \
    '! cin journalctl -u hpzerod --no-pager -o cat | grep -q "stop-sigterm.* timed out"'
check "remove: binaries gone, /etc/hpzerod.conf kept" \
    '! cin test -e /usr/sbin/hpzerod && cin test -f /etc/hpzerod.conf'

# --- purge -------------------------------------------------------------------
cin rm -rf /etc/systemd/system/hpzerod.service.d /etc/hpzerod-test.conf
cin dpkg -P hpzerod libhpz-dev libhpz0 >"$tmp/dpkg.log" 2>&1 ||
    { cat "$tmp/dpkg.log"; die "dpkg -P"; }
echo "ok   dpkg -P hpzerod libhpz-dev libhpz0"
check "purge: /etc/hpzerod.conf gone" '! cin test -e /etc/hpzerod.conf'
check "purge: no hpzerod left in /etc" \
    '[ -z "$(cin find /etc -name "*hpzerod*")" ]'
check "purge: dpkg knows no hpzerod" \
    '! cin dpkg-query -W -f="\${Status}" hpzerod 2>/dev/null | grep -q installed'

if [ "$failed" -ne 0 ]; then
	echo "--- journal of hpzerod"
	cin journalctl -u hpzerod -u hpzerod.socket --no-pager -o cat | tail -40
	die "$failed checks failed"
fi
echo "PASS: package ($SECONDS s in all)"
exit 0
