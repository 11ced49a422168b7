#!/bin/bash
# stress.sh - the interception stress test (stress.c): threads reset,
# touch, punch and remove pages while hpzerod is killed (SIGKILL, at
# times SIGTERM) every 0.5-2.5 s and started again, each life with
# another [policy]: step-aside auto, always, never, and intercept always
# now and then.  HPZ_STRESS_SECONDS (20), HPZ_STRESS_THREADS (4),
# HPZ_STRESS_SEED, HPZ_STRESS_KEEP=1 keeps the logs, HPZ_STRESS_KILLS=0
# runs one life, HPZ_STRESS_POLICY gives every life these options.  Exit 77 (skip)
# when the machine cannot run it.  No timing is asserted.
set -u
: "${HPZ_BUILDDIR:?run from make check}"
B=$HPZ_BUILDDIR

export HPZ_STRESS_SECONDS=${HPZ_STRESS_SECONDS:-20}
export HPZ_FALLBACK_MS=${HPZ_FALLBACK_MS:-500}
pages=${HPZ_STRESS_PAGES:-8}
export HPZ_STRESS_PAGES=$pages

. "$(dirname "$0")/../hugepages.sh"
. "$(dirname "$0")/../hpzd.sh"
hpzd_heavy stress "${HPZ_STRESS_KEEP:-0}"

# Two regions, and what a step aside punches and the kernel gives back.
hpzd_reserve $((4 * pages + 8))

sock=$dir/hpzerod.sock
export HPZ_SOCKET=$sock HPZ_STRESS_COUNTS=$dir/counts
lives=0
bad=0
policies=("--step-aside auto" "--step-aside always" "--step-aside never"
    "--step-aside always --intercept always" "--step-aside always")
# HPZ_STRESS_POLICY: every life runs with these options instead.
[ -n "${HPZ_STRESS_POLICY:-}" ] && policies=("$HPZ_STRESS_POLICY")
kills=${HPZ_STRESS_KILLS:-1}

start_daemon() {
	local pol=${policies[$((lives % ${#policies[@]}))]}
	echo "$(date +%s.%3N) life $((lives + 1)): $pol" >> "$dir/events"
	# shellcheck disable=SC2086  # the options are words
	hpzd_life $pol
}

start_daemon || exit 1
"$B/tests/stress/stress" 8>&- &
spid=$!
while [ "$kills" != 0 ] && kill -0 "$spid" 2>/dev/null; do
	sleep "$((RANDOM % 3)).$((RANDOM % 10))"
	sleep 0.5
	kill -0 "$spid" 2>/dev/null || break
	if [ $((RANDOM % 5)) = 0 ]; then sig=TERM; else sig=KILL; fi
	echo "$(date +%s.%3N) SIG$sig" >> "$dir/events"
	kill -$sig "$dpid"
	wait "$dpid" 2>/dev/null
	st=$?
	if [ $sig = TERM ] && [ $st != 0 ]; then
		echo "stress: VIOLATION hpzerod exited with status $st on SIGTERM"
		bad=1
	fi
	dpid=
	# Now and then longer than the fallback delay: libhpz serves alone.
	if [ $((RANDOM % 3)) = 0 ]; then sleep 0.8; else sleep 0.1; fi
	start_daemon || { bad=1; break; }
done
wait "$spid"
src=$?
spid=
[ $src != 0 ] && bad=1
hpzd_final stress: || bad=1
hpzd_sanitizer "stress: VIOLATION" "$dir"/hpzerod.*.log || bad=1
echo "--- hpzerod warnings and errors, all lives (count, message) ---"
cat "$dir"/hpzerod.*.log | grep -E '^<[0-4]>' | sed -E 's/[0-9]+/N/g' |
    sort | uniq -c | sort -rn | head -12
[ $bad != 0 ] && cat "$dir/events"
echo "stress: daemon lives=$lives $(cat "$dir/counts" 2>/dev/null)" \
    "result=$([ $bad = 0 ] && echo pass || echo FAIL)"
[ $src = 77 ] && [ $bad = 0 ] && exit 77
exit $bad
