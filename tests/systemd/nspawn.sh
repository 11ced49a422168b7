#!/bin/bash
#
# nspawn.sh - hpzerod under a real systemd: the host's own /usr booted in
# a throw-away container (systemd-nspawn --volatile=yes), the units of
# this build installed in it, and a client (tests/systemd/sdclient) that
# keeps resetting and touching pages while the daemon is
#   a. killed with SIGKILL (systemd restarts it, the fd store keeps the
#      region: 4 descriptors before and after),
#   b. stopped with SIGSTOP under WatchdogSec=2s (systemd aborts and
#      restarts it),
#   c. restarted with systemctl restart (a graceful stop and start),
#   d. left by the client (its descriptors leave the store).
# Each step checks that the client read no stale byte and no zeroed data
# page, went on working, and was not blocked for more than a generous
# bound, and what `systemctl show` says of restarts, the fd store and the
# result.  The blocked times (p50/max per step) are printed, not asserted.
#
# The client runs as a user other than the daemon's, in group hpz only:
# that exercises SocketGroup= and the capability the unit keeps for
# reading another user's /proc entries.
#
# Run by `make check` with HPZ_BUILDDIR.  Needs root, systemd-nspawn
# (Debian: systemd-container) and huge pages; exit 77 (skip) when the
# machine cannot boot a container.  Every huge page reserved and every
# cgroup made is put back on exit.

set -u

builddir=${HPZ_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=$(cd "$builddir" && pwd)
pages=${HPZ_NSPAWN_PAGES:-16}
BOUND=30		# seconds: a step that blocks the client longer fails
CLIENT_UID=4242

skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }

[ "$(id -u)" = 0 ] || skip "needs root"
for t in systemd-nspawn nsenter setpriv timeout; do
	command -v $t >/dev/null 2>&1 || skip "$t is not installed"
done
[ -x "$builddir/daemon/hpzerod" ] && [ -x "$builddir/tests/systemd/sdclient" ] &&
    [ -f "$builddir/systemd/hpzerod.service" ] ||
	die "build $builddir first (daemon, units, tests/systemd/sdclient)"
[ -d /sys/kernel/mm/hugepages/hugepages-2048kB ] || skip "no 2 MiB huge pages"

name=hpz-test-$$
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hpz-nspawn.XXXXXX") || exit 1
. "$(dirname "$0")/../hugepages.sh"
nspawn=
pid1=
client=
cgdirs=

cleanup() {
	local d
	[ -n "$client" ] && kill -KILL "$client" 2>/dev/null
	# SIGKILL to the container's init ends everything in it at once (a
	# clean shutdown could wait on a stuck service); nspawn follows.
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
	# What nspawn leaves (payload, supervisor, the cgroups systemd made
	# in there), deepest first, then our own; the last processes may take
	# a moment to leave them.
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

# in CMD...: run in the container.
cin() {
	nsenter -t "$pid1" -a "$@"
}

show() {
	cin systemctl show -p "$1" --value hpzerod.service
}

# --- the huge page pool -------------------------------------------------
# Other tests may grow and shrink the pool meanwhile: add what we need,
# and on exit take off what we added (tests/hugepages.sh).
FREE=/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages
need=$((pages + 4))
# Alone: the pool of another test's daemon (tests/qemu/pool.sh, run beside
# this one by make -j) takes every free page above its own reserve, ours
# included (the client's mmap failed with ENOMEM).
hp_alone
hp_reserve_2m "$need"
free=$(cat $FREE)
[ "$free" -ge "$pages" ] || skip "only $free huge pages free, need $pages"

# --- boot ---------------------------------------------------------------
# nspawn --keep-unit puts the container in payload/ and supervisor/ under
# the caller's cgroup: give this run cgroups of its own, so that runs do
# not meet and what is left is ours to remove.
launch() {
	local h
	for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified /sys/fs/cgroup; do
		[ -f "$h/cgroup.procs" ] || continue
		mkdir -p "$h/$name" 2>/dev/null && echo $BASHPID >"$h/$name/cgroup.procs" \
		    2>/dev/null || true
	done
	exec systemd-nspawn -q -D / --volatile=yes --register=no --keep-unit \
	    -M "$name" --bind-ro="$builddir" --console=passive --boot -- \
	    systemd.firstboot=off
}
for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified /sys/fs/cgroup; do
	[ -f "$h/cgroup.procs" ] && cgdirs="$cgdirs $h/$name"
done
launch >"$tmp/nspawn.log" 2>&1 8>&- &
nspawn=$!

# nspawn's first child may not be the container's init yet: look again
# until systemd in there answers.
pid1=
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
running|degraded) echo "container $name booted ($state)" ;;
*) cat "$tmp/nspawn.log"; skip "container did not boot (${state:-no answer})" ;;
esac

# --- install this build's units ------------------------------------------
# The build tree is bound read-only at its own path, but that may be
# under /tmp, which PrivateTmp= hides from the daemon: the daemon (one
# binary, no libtool library) is copied to /opt, the units and the
# sysusers.d file to /etc, all on the container's tmpfs.
cin mkdir -p /etc/systemd/system /etc/sysusers.d /opt/hpzerod || die "mkdir"
cin cp "$builddir/daemon/hpzerod" /opt/hpzerod/hpzerod || die "cp hpzerod"
sed "s|^ExecStart=.*/hpzerod|ExecStart=/opt/hpzerod/hpzerod|" \
    "$builddir/systemd/hpzerod.service" >"$tmp/hpzerod.service"
cin tee /etc/systemd/system/hpzerod.service <"$tmp/hpzerod.service" >/dev/null
cin tee /etc/systemd/system/hpzerod.socket \
    <"$builddir/systemd/hpzerod.socket" >/dev/null
cin tee /etc/sysusers.d/hpzerod.conf \
    <"$builddir/systemd/sysusers.d/hpzerod.conf" >/dev/null
cin systemd-sysusers /etc/sysusers.d/hpzerod.conf || die "systemd-sysusers"
gid=$(cin getent group hpz | cut -d: -f3)
[ -n "$gid" ] || die "group hpz was not made"
# Scenario b needs a short watchdog; set from the start, so that it does
# not cost a restart of its own.
cin mkdir -p /etc/systemd/system/hpzerod.service.d
# HPZ_NSPAWN_UNIT: more [Service] lines, to try the sandbox out by hand.
# LeakSanitizer (an --enable-asan build) stops the world with ptrace(),
# which the system call filter refuses: the daemon would never exit.
printf '[Service]\nWatchdogSec=2s\nEnvironment=ASAN_OPTIONS=detect_leaks=0\n%b\n' \
    "${HPZ_NSPAWN_UNIT:-}" |
    cin tee /etc/systemd/system/hpzerod.service.d/watchdog.conf >/dev/null
cin systemctl daemon-reload || die "daemon-reload"
cin systemctl start hpzerod.socket || die "cannot start hpzerod.socket"
sock=$(cin stat -c '%U:%G %a' /run/hpzerod/hpzerod.sock)
[ "$sock" = "root:hpz 660" ] || die "socket is $sock, not root:hpz 660"
echo "ok   hpzerod.socket listens, root:hpz 660"
echo "     $(cin systemd-analyze security --no-pager hpzerod.service 2>/dev/null |
    tail -1)"

# --- the client ----------------------------------------------------------
# Another uid, group hpz only.  CAP_SYS_PTRACE (ambient) lets it create a
# userfaultfd that also catches the kernel's faults (the container has no
# /dev/userfaultfd, vm.unprivileged_userfaultfd may be 0).
nsenter -t "$pid1" -a setpriv --reuid=$CLIENT_UID --regid="$gid" \
    --clear-groups --inh-caps=+sys_ptrace --ambient-caps=+sys_ptrace \
    "$builddir/tests/systemd/sdclient" -p "$pages" \
    >"$tmp/client.out" 2>"$tmp/client.err" 8>&- &
nsenter_pid=$!
for _ in $(seq 100); do
	grep -q '^ready' "$tmp/client.out" 2>/dev/null && break
	kill -0 "$nsenter_pid" 2>/dev/null || break
	sleep 0.1
done
if ! grep -q '^ready' "$tmp/client.out"; then
	cat "$tmp/client.err"
	cin journalctl -u hpzerod --no-pager -o cat | uniq -c | tail -20
	die "the client did not register"
fi
client=$(ps --ppid "$nsenter_pid" -o pid= | tr -d ' ' | head -1)
[ -n "$client" ] || die "cannot find the client's pid"
echo "ok   client registered $pages pages as uid $CLIENT_UID gid hpz"
sleep 0.5

epochs=0
failed=0
blocked=
# mark: close the client's epoch, wait for its line (at most BOUND s),
# leave it in $line.
mark() {
	local want=$((epochs + 1)) n wait=$((BOUND * 10))
	kill -USR1 "$client" || die "the client is gone"
	# Once blocked, it stays so: do not wait as long again.
	[ -n "$blocked" ] && wait=20
	for _ in $(seq $wait); do
		n=$(grep -c '^epoch ' "$tmp/client.out")
		[ "$n" -ge "$want" ] && break
		sleep 0.1
	done
	epochs=$want
	line=$(grep '^epoch ' "$tmp/client.out" | sed -n "${want}p")
	[ -n "$line" ] && return 0
	line="(none: the client was blocked over ${BOUND} s)"
	blocked=1
	return 1
}
# get KEY: the value after KEY in $line.
get() {
	local key=$1
	set -- $line
	while [ $# -ge 2 ]; do
		[ "$1" = "$key" ] && { echo "$2"; return; }
		shift
	done
}

check() {
	if eval "$2"; then
		echo "ok   $1"
	else
		echo "FAIL $1"
		failed=$((failed + 1))
	fi
}

# step NAME: what the client saw during it and the second after.
during=
after=
step_end() {
	local what=$1
	mark || true
	during=$line
	sleep 1
	mark || true
	after=$line
	printf '     %-10s during: %s\n' "$what" "$during"
	printf '     %-10s after:  %s\n' "$what" "$after"
	line=$during
	check "$what: no stale byte, no zeroed data page" \
	    '[ "$(get stale)" = 0 ] && [ "$(get zeroed)" = 0 ]'
	check "$what: the client was not blocked over ${BOUND} s" \
	    '[ -n "$(get max_us)" ]'
	line=$after
	check "$what: the client goes on (resets work again, nothing stale)" \
	    '[ "$(get stale)" = 0 ] && [ "$(get zeroed)" = 0 ] &&
	    [ "$(get resets)" -gt 0 ] 2>/dev/null'
	[ -n "$(get reset_errors)" ] && [ "$(get reset_errors)" != 0 ] &&
	    echo "     note: $(get reset_errors) reset requests failed after $what"
	figures="$figures$what p50_us $(line=$during; get p50_us) max_us $(line=$during; get max_us)\n"
}

# wait_restart N: until NRestarts is N and the service runs again.
wait_restart() {
	for _ in $(seq $((BOUND * 10))); do
		[ "$(show NRestarts)" = "$1" ] &&
		    [ "$(show ActiveState)" = active ] &&
		    [ "$(show SubState)" = running ] && return 0
		sleep 0.1
	done
	return 1
}

figures=
mark || die "no first epoch"
echo "     start      $line"

check "fd store holds the region's 4 descriptors" \
    '[ "$(show NFileDescriptorStore)" = 4 ]'
r0=$(show NRestarts)

# a. SIGKILL
mark || true
cin systemctl kill -s SIGKILL hpzerod.service
check "a: restarted after SIGKILL (NRestarts $r0 -> $((r0 + 1)))" \
    'wait_restart $((r0 + 1))'
check "a: fd store holds 4 descriptors after the restart" \
    '[ "$(show NFileDescriptorStore)" = 4 ]'
step_end a

# b. the watchdog (WatchdogSec=2s from the drop-in): the daemon stopped
r1=$(show NRestarts)
mark || true
mainpid=$(show MainPID)
cin kill -STOP "$mainpid"
check "b: watchdog restarted the stopped daemon (NRestarts $r1 -> $((r1 + 1)))" \
    'wait_restart $((r1 + 1))'
res=$(cin journalctl -u hpzerod --no-pager -o cat | grep -c 'Watchdog timeout')
check "b: systemd logged the watchdog timeout" '[ "$res" -gt 0 ]'
check "b: fd store holds 4 descriptors after the restart" \
    '[ "$(show NFileDescriptorStore)" = 4 ]'
step_end b

# c. a graceful restart under load (a manual start sets NRestarts to 0)
old_pid=$(show MainPID)
mark || true
t0=$SECONDS
cin systemctl restart hpzerod.service
check "c: restarted by systemctl restart (new MainPID, NRestarts 0)" \
    'wait_restart 0 && [ "$(show MainPID)" != "$old_pid" ]'
echo "     c          systemctl restart took $((SECONDS - t0)) s"
check "c: the daemon exited on SIGTERM by itself (no stop timeout)" \
    '! cin journalctl -u hpzerod --no-pager -o cat | grep -q "stop-sigterm.* timed out"'
step_end c
check "c: fd store holds 4 descriptors once the client is back" \
    '[ "$(show NFileDescriptorStore)" = 4 ]'
check "c: Result=success" '[ "$(show Result)" = success ]'

# d. the client leaves
n=$(show NFileDescriptorStore)
echo "     d          NFileDescriptorStore $n before the client exits"
kill -TERM "$client"
for _ in $(seq $((BOUND * 10))); do
	kill -0 "$client" 2>/dev/null || break
	sleep 0.1
done
wait "$nsenter_pid"
rc=$?
client=
check "d: the client exits 0 (nothing stale or zeroed seen)" '[ "$rc" = 0 ]'
for _ in $(seq 50); do
	[ "$(show NFileDescriptorStore)" = 0 ] && break
	sleep 0.1
done
check "d: its descriptors left the store (NFileDescriptorStore 0)" \
    '[ "$(show NFileDescriptorStore)" = 0 ]'
check "d: the daemon still runs" '[ "$(show SubState)" = running ]'

echo "blocked time of the client per step (hpz_reset + first touch, data reads):"
printf "$figures" | sed 's/^/     /'
grep '^done' "$tmp/client.out" | sed 's/^/     client: /'
if [ "$failed" -ne 0 ]; then
	echo "--- client stderr"
	tail -20 "$tmp/client.err"
	echo "--- journal of hpzerod"
	cin journalctl -u hpzerod --no-pager -o cat | uniq -c | tail -40
	die "$failed checks failed"
fi
echo "PASS: nspawn"
exit 0
