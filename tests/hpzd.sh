# hpzd.sh - sourced by the test scripts that run a hpzerod of their own
# (the soak, the stress test, the QEMU tests): its stop, its log, and the
# set-up the heavy ones share.  Needs tests/hugepages.sh sourced first for
# hpzd_heavy and hpzd_reserve.

# hpzd_stop PID PREFIX: the clean stop, SIGTERM, must exit 0.  Says so
# (PREFIX first) and returns 1 when it does not.
hpzd_stop() {
	local st
	kill -TERM "$1" 2>/dev/null
	wait "$1"
	st=$?
	if [ "$st" != 0 ]; then
		echo "${2:+$2 }hpzerod exited with status $st on SIGTERM"
		return 1
	fi
	return 0
}

# hpzd_wait_socket SOCK LOG: a daemon just started listens on SOCK
# within 20 s, or its LOG is shown and 1 returned.
hpzd_wait_socket() {
	for _ in $(seq 400); do [ -S "$1" ] && return 0; sleep 0.05; done
	echo "hpzerod did not start:"
	cat "$2"
	return 1
}

# hpzd_errors LOG: its error lines (<0> to <3>), the last 20, under a title.
hpzd_errors() {
	if grep -qE '^<[0-3]>' "$1"; then
		echo "--- hpzerod log (errors) ---"
		grep -E '^<[0-3]>' "$1" | tail -20
	fi
}

# hpzd_sanitizer PREFIX LOG...: a sanitizer report in any LOG is shown
# and returns 1.
hpzd_sanitizer() {
	local prefix=$1
	shift
	grep -lE 'Sanitizer|runtime error|^==[0-9]+==' "$@" >/dev/null 2>&1 || return 0
	echo "${prefix:+$prefix }sanitizer report from hpzerod:"
	grep -h -A30 -E 'Sanitizer|runtime error' "$@" | head -80
	return 1
}

# hpzd_scratch NAME: a scratch directory in $dir for a script's one
# daemon ($pid), and a cleanup on exit that stops it, gives back the huge
# pages and removes $dir.
hpzd_scratch() {
	dir=$(mktemp -d "/tmp/hpz-$1.XXXXXX")
	pid=
	trap hpzd_scratch_cleanup EXIT INT TERM
}

# shellcheck disable=SC2317  # called by the trap
hpzd_scratch_cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	hp_release
	rm -rf "$dir"
}

# hpzd_heavy NAME KEEP: the set-up of a test that kills and restarts its
# daemon (the soak, the stress test): root or skip, the machine to itself
# (hp_alone), a scratch directory in $dir, and a cleanup on exit that kills
# $spid and $dpid, gives back the huge pages and removes $dir unless KEEP
# is 1.
hpzd_heavy() {
	if [ "$(id -u)" != 0 ]; then
		echo "SKIP: the $1 test needs root (huge page pool, userfaultfd)"
		exit 77
	fi
	hpzd_name=$1
	hpzd_keep=$2
	FREE=/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages
	hp_alone
	dir=$(mktemp -d "/tmp/hpz-$1.XXXXXX")
	dpid=
	spid=
	trap hpzd_heavy_cleanup EXIT
	trap 'exit 130' INT TERM
}

# shellcheck disable=SC2317  # called by the trap
hpzd_heavy_cleanup() {
	[ -n "$spid" ] && kill -KILL "$spid" 2>/dev/null
	[ -n "$dpid" ] && kill -KILL "$dpid" 2>/dev/null &&
	    wait "$dpid" 2>/dev/null
	hp_release
	if [ "$hpzd_keep" = 1 ]; then
		echo "$hpzd_name: logs kept in $dir"
	else
		rm -rf "$dir"
	fi
}

# hpzd_life [OPTION...]: the next life of the heavy test's daemon on
# $sock ($lives counts them; its log hpzerod.$lives.log in $dir), once it
# says it serves (a killed one's socket file may still be there).  1, with
# its log shown, when it does not.
hpzd_life() {
	lives=$((lives + 1))
	"$B/daemon/hpzerod" --socket "$sock" --workers 2 --pool off "$@" \
	    2>"$dir/hpzerod.$lives.log" 8>&- &
	dpid=$!
	for _ in $(seq 400); do
		grep -qs ' ready: ' "$dir/hpzerod.$lives.log" && return 0
		kill -0 "$dpid" 2>/dev/null || break
		sleep 0.025
	done
	echo "$hpzd_name: hpzerod did not start:"
	cat "$dir/hpzerod.$lives.log"
	return 1
}

# hpzd_reserve N: add N 2 MiB pages, or skip when the pool cannot give
# them.  Core files off: the daemons are killed with signals that dump.
hpzd_reserve() {
	hp_reserve_2m "$1"
	if [ "$(cat "$FREE")" -lt "$1" ]; then
		echo "SKIP: could not reserve $1 huge pages of 2 MiB" \
		    "(free $(cat "$FREE"))"
		exit 77
	fi
	ulimit -c 0
}

# hpzd_final PREFIX: the last life of $dpid: it must still run and stop
# cleanly.  Returns 1 (after saying why) when not.
hpzd_final() {
	local rc=0
	[ -n "$dpid" ] || return 0
	if ! kill -0 "$dpid" 2>/dev/null; then
		echo "$1 VIOLATION hpzerod died by itself"; rc=1
	fi
	hpzd_stop "$dpid" "$1 VIOLATION (its last life)" || rc=1
	dpid=
	return $rc
}
