#!/bin/bash
# run.sh - start a real hpzerod on a temporary socket, reserve the huge
# pages the integration tests need, run them, put everything back.
# Exit 77 (skip) when the machine cannot run them.
set -u
: "${HPZ_BUILDDIR:?run from make check}"
B=$HPZ_BUILDDIR

if [ "$(id -u)" != 0 ]; then
	echo "SKIP: integration tests need root (huge page pool, userfaultfd)"
	exit 77
fi
if [ ! -e /dev/userfaultfd ] && ! grep -q 1 /proc/sys/vm/unprivileged_userfaultfd 2>/dev/null; then
	echo "note: no /dev/userfaultfd; relying on the userfaultfd syscall"
fi

. "$(dirname "$0")/../hugepages.sh"
. "$(dirname "$0")/../hpzd.sh"
hp_alone
hpzd_scratch itest

# 1 GiB pages, if the kernel can find them: one for serve's test, four for
# the pool's refill on every CPU (pool/a_refill_on_every_cpu_gives_nothing_
# back); then 2 MiB pages.
hp_reserve_1g 4
hp_reserve_2m 400
echo "huge pages: 2 MiB free $(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages) (400 added)," \
	"1 GiB free $(cat /sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages 2>/dev/null || echo "none (the kernel has no 1 GiB huge pages)")"

sock=$dir/hpzerod.sock
# HPZ_VALGRIND=1: the daemon runs under valgrind memcheck (slow); any error
# or leak fails the run.
vg=
if [ -n "${HPZ_VALGRIND:-}" ]; then
	vg="valgrind --quiet --error-exitcode=99 --leak-check=full \
	    --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect"
	export HPZ_WAIT_SCALE=20
fi
$vg "$B/daemon/hpzerod" --socket "$sock" --workers 2 --pool off --step-aside never 2>"$dir/hpzerod.log" 8>&- &
pid=$!
hpzd_wait_socket "$sock" "$dir/hpzerod.log" || exit 1

export HPZ_SOCKET=$sock HPZD_PID=$pid
# The suite's regions are fresh memfds, whatever the host's pool holds;
# the pool's own tests (itest-pool.c) start daemons of their own.
export HPZ_NO_POOL=1
# Step-aside never: counts of pages cleared stay what the tests expect on
# a loaded machine; the stress test (tests/stress) runs every policy.
# One job: the tests share one daemon and read its counters.
"$B/tests/integration/itest" --jobs 1 "$@" 8>&-
rc=$?
if ! kill -0 "$pid" 2>/dev/null; then
	echo "hpzerod died during the tests"; rc=1
fi
# A clean stop: exit 0, and under ASan no error or leak report.
hpzd_stop "$pid" || rc=1
pid=
hpzd_sanitizer "" "$dir/hpzerod.log" || rc=1
echo "--- hpzerod log (warnings and errors) ---"
grep -E '^<[0-4]>' "$dir/hpzerod.log" | tail -40
exit $rc
