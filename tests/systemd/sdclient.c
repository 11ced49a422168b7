/*
 * sdclient.c - the client of tests/systemd/nspawn.sh: a libhpz user that
 * keeps working while the daemon under a real systemd is killed, stopped
 * and restarted around it.
 *
 * It registers a hugetlbfs memfd region, writes a pattern to the even
 * pages ("data") and, in a loop, turns each odd page into garbage and
 * resets it ("reset" pages).  Every pass checks that
 *   - a reset page reads zero in full once touched (no stale byte),
 *   - a data page still holds its pattern (never zeroed, never changed),
 * and times every step that can wait on the daemon (the reset request and
 * the first touch after it, the read of a data page): that is how long
 * the client was blocked.
 *
 * The test script drives it with signals: SIGUSR1 closes the current
 * epoch, printed as one line
 *   epoch N ops O resets R reset_errors E stale S zeroed Z p50_us P max_us M
 *       waiting_us W
 * (W: how long the step in progress has waited, counted in M too; a failed
 * reset is retried, and marks are served while it is),
 * and SIGTERM ends it after a last such line and "done ...".  It does not
 * unregister: the daemon must notice on its own that the client left.
 *
 * usage: sdclient [-p pages]
 * Exit status: 0 nothing wrong was read; 1 a stale or zeroed page was
 * seen; 2 set-up failed.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hpz.h"
#include "../tclock.h"

#define SDC_PAGE	(2UL << 20)
#define SDC_GARBAGE	0xa5u
#define SDC_SAMPLES	(1 << 16)	/* timings kept per epoch */
#define SDC_RETRY_NS	(10 * 1000 * 1000ULL)

static volatile sig_atomic_t	sdc_marks;	/* SIGUSR1s received */
static volatile sig_atomic_t	sdc_stop;

struct sdc_epoch {
	unsigned long long	 ops;
	unsigned long long	 resets;	/* resets that succeeded */
	unsigned long long	 reset_errors;	/* failed tries */
	unsigned long long	 stale;		/* nonzero bytes after a reset */
	unsigned long long	 zeroed;	/* data pages read back zero */
	unsigned long long	 max_ns;
	size_t			 n;
	uint64_t		 samples[SDC_SAMPLES];
};

static struct sdc_epoch	 sdc_ep;
static unsigned int	 sdc_epoch;
static sig_atomic_t	 sdc_seen;
static unsigned long long sdc_total_stale, sdc_total_zeroed;

static void
sdc_signal(int sig)
{
	if (sig == SIGUSR1)
		sdc_marks++;
	else
		sdc_stop = 1;
}

static void
sdc_sample(uint64_t ns)
{
	if (sdc_ep.n < SDC_SAMPLES)
		sdc_ep.samples[sdc_ep.n++] = ns;
	if (ns > sdc_ep.max_ns)
		sdc_ep.max_ns = ns;
	sdc_ep.ops++;
}

static int
sdc_cmp(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x < y ? -1 : x > y);
}

/*
 * Print the epoch that ends and start the next.  since: when the step in
 * progress began, 0 if none is.
 */
static void
sdc_epoch_end(uint64_t since)
{
	uint64_t	p50 = 0, waiting = 0;

	if (sdc_ep.n > 0) {
		qsort(sdc_ep.samples, sdc_ep.n, sizeof(sdc_ep.samples[0]),
		    sdc_cmp);
		p50 = sdc_ep.samples[sdc_ep.n / 2];
	}
	if (since != 0)
		waiting = tclock_ns() - since;
	if (waiting > sdc_ep.max_ns)
		sdc_ep.max_ns = waiting;
	printf("epoch %u ops %llu resets %llu reset_errors %llu stale %llu "
	    "zeroed %llu p50_us %llu max_us %llu waiting_us %llu\n",
	    sdc_epoch++, sdc_ep.ops, sdc_ep.resets, sdc_ep.reset_errors,
	    sdc_ep.stale, sdc_ep.zeroed, (unsigned long long)(p50 / 1000),
	    (unsigned long long)(sdc_ep.max_ns / 1000),
	    (unsigned long long)(waiting / 1000));
	fflush(stdout);
	sdc_total_stale += sdc_ep.stale;
	sdc_total_zeroed += sdc_ep.zeroed;
	memset(&sdc_ep, 0, sizeof(sdc_ep) - sizeof(sdc_ep.samples));
}

/* Close an epoch for every SIGUSR1 not yet served. */
static void
sdc_marks_serve(uint64_t since)
{
	while (sdc_seen != sdc_marks) {
		sdc_seen++;
		sdc_epoch_end(since);
	}
}

/* The word a data page holds at word w. */
static uint64_t
sdc_pattern(size_t page, size_t w)
{
	return (0x9e3779b97f4a7c15ULL * (page + 1) ^ w);
}

static void
sdc_fill(unsigned char *p, size_t page)
{
	uint64_t	*w = (uint64_t *)p;
	size_t		 i;

	for (i = 0; i < SDC_PAGE / sizeof(*w); i++)
		w[i] = sdc_pattern(page, i);
}

/* Check a data page: a zeroed one is counted apart from other damage. */
static void
sdc_check_data(const unsigned char *p, size_t page)
{
	const volatile uint64_t	*w = (const volatile uint64_t *)p;
	uint64_t		 t0, v;
	size_t			 i, bad = 0, zero = 0;

	t0 = tclock_ns();
	v = w[0];
	sdc_sample(tclock_ns() - t0);
	for (i = 0; i < SDC_PAGE / sizeof(*w); i++) {
		v = w[i];
		if (v != sdc_pattern(page, i)) {
			bad++;
			if (v == 0)
				zero++;
		}
	}
	if (bad == 0)
		return;
	if (zero == bad)
		sdc_ep.zeroed++;
	else
		sdc_ep.stale++;
	fprintf(stderr, "sdclient: data page %zu: %zu words wrong (%zu "
	    "zero)\n", page, bad, zero);
}

/*
 * Make a page garbage, reset it and check that it reads zero.  A reset
 * that fails (the daemon is away) is retried until it works or we are
 * told to stop; the whole wait counts as blocked.
 */
static void
sdc_reset_page(struct hpz_region *r, size_t page)
{
	struct hpz_region	 sub = *r;
	unsigned char		*p = (unsigned char *)r->addr + page * SDC_PAGE;
	const volatile uint64_t	*w = (const volatile uint64_t *)p;
	struct timespec		 ts = { 0, SDC_RETRY_NS };
	uint64_t		 t0;
	size_t			 i, stale = 0;
	int			 error;

	memset(p, SDC_GARBAGE, SDC_PAGE);
	sub.addr = p;
	sub.len = SDC_PAGE;
	t0 = tclock_ns();
	while ((error = hpz_reset(&sub)) != 0) {
		if (sdc_ep.reset_errors++ == 0)
			fprintf(stderr, "sdclient: hpz_reset: %s (retrying)\n",
			    hpz_last_error());
		if (sdc_stop) {
			sdc_sample(tclock_ns() - t0);
			return;
		}
		nanosleep(&ts, NULL);
		sdc_marks_serve(t0);
	}
	(void)w[0];			/* the fault */
	sdc_sample(tclock_ns() - t0);
	sdc_ep.resets++;
	for (i = 0; i < SDC_PAGE / sizeof(*w); i++)
		if (w[i] != 0)
			stale++;
	if (stale != 0) {
		sdc_ep.stale++;
		fprintf(stderr, "sdclient: reset page %zu: %zu nonzero words\n",
		    page, stale);
	}
}

int
main(int argc, char *argv[])
{
	struct hpz_region	 r;
	struct sigaction	 sa;
	size_t			 pages = 16, i;
	unsigned long long	 passes = 0;
	int			 ch, error;

	while ((ch = getopt(argc, argv, "p:")) != -1) {
		switch (ch) {
		case 'p':
			pages = strtoul(optarg, NULL, 10);
			break;
		default:
			fprintf(stderr, "usage: sdclient [-p pages]\n");
			return (2);
		}
	}
	if (pages < 2) {
		fprintf(stderr, "sdclient: at least 2 pages\n");
		return (2);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = sdc_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	if ((error = hpz_region_create(&r, pages * SDC_PAGE, HPZ_PAGE_2M))
	    != 0) {
		fprintf(stderr, "sdclient: %s\n", hpz_last_error());
		return (2);
	}
	r.flags = HPZ_DISCARD;
	if ((error = hpz_register(&r)) != 0) {
		fprintf(stderr, "sdclient: hpz_register: %s\n",
		    hpz_last_error());
		return (2);
	}
	for (i = 0; i < pages; i += 2)
		sdc_fill((unsigned char *)r.addr + i * SDC_PAGE, i);
	printf("ready pid %d pages %zu\n", (int)getpid(), pages);
	fflush(stdout);

	while (!sdc_stop) {
		for (i = 0; i < pages && !sdc_stop; i++) {
			if (i % 2 == 0)
				sdc_check_data((unsigned char *)r.addr +
				    i * SDC_PAGE, i);
			else
				sdc_reset_page(&r, i);
			sdc_marks_serve(0);
		}
		passes++;
	}
	sdc_epoch_end(0);
	printf("done passes %llu stale %llu zeroed %llu\n", passes,
	    sdc_total_stale, sdc_total_zeroed);
	fflush(stdout);
	/* Exit without hpz_unregister: the daemon must see us leave. */
	return (sdc_total_stale != 0 || sdc_total_zeroed != 0 ? 1 : 0);
}
