#!/bin/bash
# soak.sh - the bounded soak test: client processes (soak.c) work on
# their regions while hpzerod is killed (SIGKILL, at times SIGTERM or
# SIGABRT) every 1-4 s and started again after a short pause, at times a
# pause longer than libhpz's fallback delay.
#
# HPZ_SOAK_SECONDS (60), HPZ_SOAK_PROCS (8), HPZ_SOAK_KILLS (1; 0 runs
# without kills), HPZ_SOAK_SEED, HPZ_FALLBACK_MS (500 here: libhpz serves
# faults itself after that long without a daemon), HPZ_SOAK_KEEP=1 keeps
# the daemon logs, HPZ_SOAK_DAEMON_ARGS adds options to every hpzerod
# started (e.g. "--scrub off").  Exit 77 (skip) when the machine cannot
# run it.
set -u
: "${HPZ_BUILDDIR:?run from make check}"
B=$HPZ_BUILDDIR

seconds=${HPZ_SOAK_SECONDS:-60}
procs=${HPZ_SOAK_PROCS:-8}
huge=${HPZ_SOAK_HUGE:-16}
kills=${HPZ_SOAK_KILLS:-1}
export HPZ_SOAK_SECONDS=$seconds HPZ_SOAK_PROCS=$procs HPZ_SOAK_HUGE=$huge
export HPZ_FALLBACK_MS=${HPZ_FALLBACK_MS:-500}

. "$(dirname "$0")/../hugepages.sh"
. "$(dirname "$0")/../hpzd.sh"
hpzd_heavy soak "${HPZ_SOAK_KEEP:-0}"

# Every process may map $huge pages at once; the rest is for the pool's
# other users, who keep what they had.  No core files from SIGABRT.
hpzd_reserve $((procs * huge + 16))

sock=$dir/hpzerod.sock
export HPZ_SOCKET=$sock HPZ_SOAK_COUNTS=$dir/counts
lives=0
bad=0

# shellcheck disable=SC2086  # the options are words
start_daemon() { hpzd_life ${HPZ_SOAK_DAEMON_ARGS:-}; }

# Sleep $1 milliseconds, or less if the clients are done.
nap() {
	local left=$1
	while [ "$left" -gt 0 ] && kill -0 "$spid" 2>/dev/null; do
		if [ "$left" -ge 100 ]; then
			sleep 0.1; left=$((left - 100))
		else
			sleep "0.$(printf %03d "$left")"; left=0
		fi
	done
}

start_daemon || exit 1
# Client and libhpz messages get the realtime of their arrival, to line
# them up with the kills.
"$B/tests/soak/soak" 8>&- 2> >(while IFS= read -r l; do
	printf '%s %s\n' "$(date +%s.%3N)" "$l"; done >&2) &
spid=$!

nkill=0 nterm=0 nabrt=0 restarts=0 long=0
if [ "$kills" != 0 ]; then
	while kill -0 "$spid" 2>/dev/null; do
		nap $((1000 + RANDOM % 3001))
		kill -0 "$spid" 2>/dev/null || break
		r=$((RANDOM % 10))
		if [ $r -lt 7 ]; then
			sig=KILL; nkill=$((nkill + 1))
		elif [ $r -lt 9 ]; then
			sig=TERM; nterm=$((nterm + 1))
		else
			sig=ABRT; nabrt=$((nabrt + 1))
		fi
		echo "$(date +%s.%3N) SIG$sig" >> "$dir/events"
		kill -$sig "$dpid"
		wait "$dpid" 2>/dev/null
		st=$?
		echo "$(date +%s.%3N) gone (status $st)" >> "$dir/events"
		# SIGTERM is the clean stop: it must exit 0.
		if [ $sig = TERM ] && [ $st != 0 ]; then
			echo "soak: VIOLATION hpzerod exited with" \
			    "status $st on SIGTERM"
			bad=1
		fi
		dpid=
		if [ $((RANDOM % 4)) = 0 ]; then
			# Longer than the fallback delay: libhpz serves alone.
			long=$((long + 1))
			nap $((HPZ_FALLBACK_MS + 200 + RANDOM % 800))
		else
			nap $((RANDOM % 501))
		fi
		start_daemon || { bad=1; break; }
		echo "$(date +%s.%3N) ready (life $lives)" >> "$dir/events"
		restarts=$((restarts + 1))
	done
fi
wait "$spid"
src=$?
spid=
sleep 0.3	# the time-stamper's last lines
[ $src != 0 ] && bad=1

hpzd_final soak: || bad=1
hpzd_sanitizer "soak: VIOLATION" "$dir"/hpzerod.*.log || bad=1
echo "--- hpzerod warnings and errors, all lives (count, message) ---"
cat "$dir"/hpzerod.*.log | grep -E '^<[0-4]>' |
    sed -E 's/client [0-9]+ \(pid [0-9]+/client N (pid P/' |
    sed -E 's/0x[0-9a-f]+/0x.../g' |
    sort | uniq -c | sort -rn | head -20

if [ $bad != 0 ] && [ -s "$dir/events" ]; then
	echo "--- daemon kills and restarts (realtime s) ---"
	cat "$dir/events"
fi
counts=$(cat "$dir/counts" 2>/dev/null || echo "no client counts")
echo "soak: $counts daemon_kills=KILL:$nkill,TERM:$nterm,ABRT:$nabrt" \
    "restarts=$restarts long_pauses=$long fallback_ms=$HPZ_FALLBACK_MS" \
    "result=$([ $bad = 0 ] && echo pass || echo FAIL)"
[ $src = 77 ] && [ $bad = 0 ] && exit 77
exit $bad
