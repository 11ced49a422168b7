/*
 * stats.c - daemon-wide counters and the status reply built from them.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hpzerod.h"

struct stats	stats;

uint64_t
stats_now_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec);
}

/* Account one resolved fault, from read to mapped. */
void
stats_fault_latency(uint64_t ns)
{
	uint_fast64_t	max;

	atomic_fetch_add_explicit(&stats.fault_ns_total, ns,
	    memory_order_relaxed);
	max = atomic_load_explicit(&stats.fault_ns_max, memory_order_relaxed);
	while (ns > max && !atomic_compare_exchange_weak(&stats.fault_ns_max,
	    &max, ns))
		;
}

static uint64_t
stats_bytes_registered(void)
{
	struct region	*r;
	uint64_t	 total = 0;

	TAILQ_FOREACH(r, &region_all, all)
		total += r->len;
	return (total);
}

static uint64_t
stats_nregions(void)
{
	struct region	*r;
	uint64_t	 n = 0;

	TAILQ_FOREACH(r, &region_all, all)
		n++;
	return (n);
}

/* Fill a status reply (main thread: it walks the region list). */
void
stats_fill(struct hpz_msg_status_reply *s)
{
	snprintf(s->version, sizeof(s->version), "%s", PACKAGE_VERSION);
	s->uptime_ms = (stats_now_ns() - hpzd_start_ns) / 1000000;
	s->clients = control_nclients();
	s->regions = stats_nregions();
	s->bytes_registered = stats_bytes_registered();
	s->workers = (uint64_t)worker_count();
	s->faults = atomic_load(&stats.faults);
	s->faults_missing = atomic_load(&stats.faults_missing);
	s->faults_minor = atomic_load(&stats.faults_minor);
	s->faults_shared = atomic_load(&stats.faults_shared);
	s->pages_cleared = atomic_load(&stats.pages_cleared);
	s->bytes_cleared = atomic_load(&stats.bytes_cleared);
	s->pages_populated = atomic_load(&stats.pages_populated);
	s->pages_punched = atomic_load(&stats.pages_punched);
	s->resets = atomic_load(&stats.resets);
	s->registers = atomic_load(&stats.registers);
	s->unregisters = atomic_load(&stats.unregisters);
	s->requests_rejected = atomic_load(&stats.requests_rejected);
	s->clients_dropped = atomic_load(&stats.clients_dropped);
	s->fault_ns_total = atomic_load(&stats.fault_ns_total);
	s->fault_ns_max = atomic_load(&stats.fault_ns_max);
}

/* One line for sd_notify STATUS=. */
void
stats_summary(char *buf, size_t len)
{
	snprintf(buf, len, "%zu clients, %llu regions (%llu MiB), "
	    "%llu faults served, %llu pages cleared", control_nclients(),
	    (unsigned long long)stats_nregions(),
	    (unsigned long long)(stats_bytes_registered() >> 20),
	    (unsigned long long)atomic_load(&stats.faults),
	    (unsigned long long)atomic_load(&stats.pages_cleared));
}
