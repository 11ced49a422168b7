/*
 * test-route.c - unit tests of the choice of worker for a fault
 * (worker_route in worker.c).
 */
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "globals.h"
#include "topo.h"
#include "worker.h"

/* --- worker_route ------------------------------------------------------- */

/* CPUs 0-3 on node 0, 4-7 on node 1; node 2 exists but has no worker. */
static void
route_topo(struct topo *t)
{
	int	cpu;

	memset(t, 0, sizeof(*t));
	t->ncpus = 12;
	t->nnodes = 3;
	for (cpu = 0; cpu < 12; cpu++) {
		t->cpu_online[cpu] = 1;
		t->cpu_node[cpu] = cpu < 4 ? 0 : cpu < 8 ? 1 : 2;
	}
}

/* Workers on CPUs 0, 2, 4, 6 and 7 (nodes 0, 0, 1, 1, 1). */
static const int	route_cpus[] = { 0, 2, 4, 6, 7 };
#define ROUTE_N		((int)(sizeof(route_cpus) / sizeof(route_cpus[0])))

Test(route, local_worker)
{
	static struct topo	t;

	route_topo(&t);
	cr_expect_eq(worker_route(&t, route_cpus, ROUTE_N, 6, 1, 0), 3);
	cr_expect_eq(worker_route(&t, route_cpus, ROUTE_N, 6, 1, 12345), 3);
	cr_expect_eq(worker_route(&t, route_cpus, ROUTE_N, 2, 0, 99), 1);
}

Test(route, remote_fault_cpu)
{
	static struct topo	t;
	static const int	node1[] = { 2, 3, 4 };	/* workers on node 1 */
	uint64_t		h;
	int			w;

	route_topo(&t);
	for (h = 0; h < 9; h++) {
		w = worker_route(&t, route_cpus, ROUTE_N, 0, 1, h);
		cr_expect_eq(w, node1[h % 3], "hash %llu: worker %d",
		    (unsigned long long)h, w);
	}
	/* A node-1 CPU without a worker: still by hash among node 1. */
	cr_expect_eq(worker_route(&t, route_cpus, ROUTE_N, 5, 1, 4), 3);
}

Test(route, no_page_node)
{
	static struct topo	t;
	int			cpu, i;

	route_topo(&t);
	for (i = 0; i < ROUTE_N; i++) {
		cpu = route_cpus[i];
		cr_expect_eq(worker_route(&t, route_cpus, ROUTE_N, cpu, -1,
		    777), i, "cpu %d", cpu);
	}
}

Test(route, no_worker_on_cpu)
{
	static struct topo	t;
	uint64_t		h;

	route_topo(&t);
	for (h = 0; h < 20; h++) {
		cr_expect_eq(worker_route(&t, route_cpus, ROUTE_N, 3, -1, h),
		    (int)(h % ROUTE_N));
		cr_expect_eq(worker_route(&t, route_cpus, ROUTE_N, -1, -1, h),
		    (int)(h % ROUTE_N));
		cr_expect_eq(worker_route(&t, route_cpus, ROUTE_N, 5000, -1, h),
		    (int)(h % ROUTE_N));
	}
}

Test(route, node_without_workers)
{
	static struct topo	t;

	route_topo(&t);
	/* Node 2: no worker; the fault CPU's worker, else by hash. */
	cr_expect_eq(worker_route(&t, route_cpus, ROUTE_N, 4, 2, 3), 2);
	cr_expect_eq(worker_route(&t, route_cpus, ROUTE_N, 9, 2, 8), 8 % 5);
	/* A node the topology has never heard of. */
	cr_expect_eq(worker_route(&t, route_cpus, ROUTE_N, 7, 50, 1), 4);
}

Test(route, unpinned_workers)
{
	static struct topo	t;
	static const int	cpus[] = { -1, -1, 5 };

	route_topo(&t);
	cr_expect_eq(worker_route(&t, cpus, 3, 0, 1, 7), 2);
	cr_expect_eq(worker_route(&t, cpus, 3, 0, 0, 7), 7 % 3);
	cr_expect_eq(worker_route(&t, cpus, 3, -1, -1, 4), 1);
}

Test(route, zero_workers)
{
	static struct topo	t;

	route_topo(&t);
	cr_expect_eq(worker_route(&t, route_cpus, 0, 4, 1, 1), -1);
	cr_expect_eq(worker_route(&t, route_cpus, -3, 4, -1, 1), -1);
}

Test(route, property_node_local)
{
	static struct topo	t;
	static int		cpus[HPZD_WORKERS_MAX];
	uint64_t		h;
	int			w, n, fault, i;

	route_topo(&t);
	for (h = 0; h < 5000; h++) {
		w = worker_route(&t, route_cpus, ROUTE_N, (int)(h % 12), 1,
		    h * 0x9e3779b97f4a7c15ULL);
		cr_assert(w >= 0 && w < ROUTE_N, "hash %llu: %d",
		    (unsigned long long)h, w);
		cr_assert_eq(t.cpu_node[route_cpus[w]], 1, "hash %llu: "
		    "worker %d on cpu %d", (unsigned long long)h, w,
		    route_cpus[w]);
	}
	/* As many workers as allowed, two a CPU. */
	n = HPZD_WORKERS_MAX;
	for (i = 0; i < n; i++)
		cpus[i] = i % 12;
	for (h = 0; h < 2000; h++) {
		fault = (int)(h % 13) - 1;
		w = worker_route(&t, cpus, n, fault, (int)(h % 3), h);
		cr_assert(w >= 0 && w < n);
		cr_assert_eq(t.cpu_node[cpus[w]], (int)(h % 3));
		if (fault >= 0 && t.cpu_node[fault] == (int)(h % 3))
			cr_assert_eq(cpus[w], fault);
	}
}

/* --- worker_owner_home: one uid's stuck workers are capped ----------------- */

/* Slots 0-4: uid 7 holds 0 and 3 stuck, uid 9 holds 1; 2 and 4 are free. */
static const uint32_t	owner_slow[] = { 7, 9, 0, 7, 0 };
static const int	owner_avoided[] = { 1, 1, 0, 1, 0 };

Test(route, owner_under_its_cap_is_routed_as_usual)
{
	/* uid 9 holds one: under a cap of 2, its next fault goes anywhere. */
	cr_expect_eq(worker_owner_home(owner_slow, owner_avoided, 5, 9, 0, 2),
	    -1);
	/* A uid that holds none. */
	cr_expect_eq(worker_owner_home(owner_slow, owner_avoided, 5, 3, 0, 2),
	    -1);
}

Test(route, owner_at_its_cap_waits_on_its_own_stuck_workers)
{
	int	k, i, seen0 = 0, seen3 = 0;

	/*
	 * uid 7 holds two: a fault of another of its processes goes to one
	 * of those two, never to a free one another uid needs.
	 */
	for (k = 0; k < 16; k++) {
		i = worker_owner_home(owner_slow, owner_avoided, 5, 7,
		    (uint64_t)k, 2);
		cr_expect(i == 0 || i == 3, "key %d went to slot %d", k, i);
		seen0 += i == 0;
		seen3 += i == 3;
	}
	/* Spread over them by key; the same key always to the same slot. */
	cr_expect_gt(seen0, 0);
	cr_expect_gt(seen3, 0);
	cr_expect_eq(worker_owner_home(owner_slow, owner_avoided, 5, 7, 5, 2),
	    worker_owner_home(owner_slow, owner_avoided, 5, 7, 5, 2));
}

Test(route, owner_slots_no_longer_avoided_do_not_count)
{
	static const int	back[] = { 1, 1, 0, 0, 0 };	/* 3 is back */

	cr_expect_eq(worker_owner_home(owner_slow, back, 5, 7, 0, 2), -1);
}

Test(route, unknown_owner_is_never_capped)
{
	static const uint32_t	slow[] = { WORKER_NO_OWNER, WORKER_NO_OWNER };
	static const int	avoided[] = { 1, 1 };

	cr_expect_eq(worker_owner_home(slow, avoided, 2, WORKER_NO_OWNER, 0,
	    1), -1);
}
