/*
 * upgrade-client.c - a client of the installed libhpz that lives through a
 * package upgrade (tests/debian/package.sh), and the hog that follows it.
 *
 * upgrade-client [-P] [-d pages] [-g pages] [-t pages]
 *   One region of 2 MiB pages from a hugetlb memfd of its own, registered
 *   with HPZ_NO_SCRUB (garbage stays garbage until touched, so that some
 *   is there whenever the daemon lets go; with scrub it would be cleared
 *   behind us and a lost page could not show).  Three parts:
 *     data  [0, d)        written once with a pattern, never reset
 *     cold  [d, d+g)      written, reset once, not touched again until
 *                         the end: garbage when the daemon exits
 *     hot   [d+g, d+g+t)  each round: read (must be zero), written,
 *                         reset; a round's time is the client's stall
 *   It prints "pid N" and "ready", runs rounds until SIGUSR1, then reads
 *   every page: zero where it had garbage, its pattern in data, no SIGBUS.
 *   -P registers with HPZ_RELEASE_HOLES: the daemon punches the garbage
 *   when it lets go of the region instead of clearing it in place (the
 *   old way, without the defence), for the test to show it would see that.
 *   Exit 0 when no page is lost and no byte is wrong, 1 otherwise.
 *
 * upgrade-client hog
 *   Takes every free 2 MiB huge page of the host (mapped and written, so
 *   they are its own), prints how many, holds them until killed.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>

#include <hpz.h>

#define PAGE		(2UL << 20)
#define ROUND_NAP_US	20000	/* between rounds: a guest's think time */
#define GARBAGE_BYTE	0xa5

static volatile sig_atomic_t	stop;
static volatile sig_atomic_t	bus_armed;
static sigjmp_buf		bus_jb;

static void
on_usr1(int sig)
{
	(void)sig;
	stop = 1;
}

static void
on_bus(int sig)
{
	(void)sig;
	if (bus_armed) {
		bus_armed = 0;
		siglongjmp(bus_jb, 1);
	}
	_exit(3);
}

static uint64_t
now_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec);
}

/* The byte data page i holds. */
static unsigned char
data_byte(size_t i)
{
	return ((unsigned char)(0x11 + i % 200));
}

/* Bytes of the page at p that are not b. */
static size_t
page_wrong(const unsigned char *p, unsigned char b)
{
	const uint64_t	*q = (const uint64_t *)(const void *)p;
	uint64_t	 w;
	size_t		 i, j, bad = 0;

	memset(&w, b, sizeof(w));
	for (i = 0; i < PAGE / sizeof(w); i++)
		if (q[i] != w)
			for (j = 0; j < sizeof(w); j++)
				bad += p[i * sizeof(w) + j] != b;
	return (bad);
}

/*
 * Read page i of base against b (under a SIGBUS recovery point): 0 right,
 * 1 wrong bytes (counted in *wrong), 2 lost (SIGBUS).
 */
static int
page_check(unsigned char *base, size_t i, unsigned char b, size_t *wrong)
{
	size_t	bad;

	if (sigsetjmp(bus_jb, 1) != 0)
		return (2);
	bus_armed = 1;
	bad = page_wrong(base + i * PAGE, b);
	bus_armed = 0;
	*wrong += bad;
	return (bad != 0);
}

/* Write page i of base with b; -1 on SIGBUS. */
static int
page_fill(unsigned char *base, size_t i, unsigned char b)
{
	if (sigsetjmp(bus_jb, 1) != 0)
		return (-1);
	bus_armed = 1;
	memset(base + i * PAGE, b, PAGE);
	bus_armed = 0;
	return (0);
}

static int
reset_pages(struct hpz_region *r, size_t first, size_t n)
{
	struct hpz_region	sub = *r;
	int			error;

	sub.addr = (char *)r->addr + first * PAGE;
	sub.len = n * PAGE;
	if ((error = hpz_reset(&sub)) != 0)
		fprintf(stderr, "upgrade-client: hpz_reset of pages %zu-%zu: "
		    "%s\n", first, first + n - 1, hpz_last_error());
	return (error);
}

static int
hog(void)
{
	FILE		*f;
	long		 free_pages = 0, i, got = 0;
	unsigned char	*p;

	f = fopen("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
	    "r");
	if (f == NULL || fscanf(f, "%ld", &free_pages) != 1) {
		perror("upgrade-client hog: free_hugepages");
		return (1);
	}
	fclose(f);
	/* More than are free: every page there is to take, we take. */
	p = mmap(NULL, (size_t)(free_pages + 16) * PAGE, PROT_READ |
	    PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB |
	    MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		perror("upgrade-client hog: mmap");
		return (1);
	}
	for (i = 0; i < free_pages + 16; i++)
		if (madvise(p + i * PAGE, PAGE, MADV_POPULATE_WRITE) == 0)
			got++;
	printf("hog: pid %d\nhog: took %ld huge pages (%ld were free)\n",
	    (int)getpid(), got, free_pages);
	fflush(stdout);
	for (;;)
		pause();
}

int
main(int argc, char **argv)
{
	struct hpz_region	 r;
	struct sigaction	 sa;
	unsigned char		*base;
	size_t			 nd = 16, ng = 32, nt = 8, n, i, wrong = 0;
	size_t			 lost = 0, bad_pages = 0, rounds = 0;
	size_t			 worst_round = 0, round_lost = 0;
	uint64_t		 t0, t1, dt, worst = 0, worst_touch = 0;
	uint64_t		 worst_reset = 0;
	unsigned int		 flags = HPZ_NO_SCRUB;
	int			 c, error, errors = 0, rc;

	if (argc == 2 && strcmp(argv[1], "hog") == 0)
		return (hog());
	while ((c = getopt(argc, argv, "Pd:g:t:")) != -1)
		switch (c) {
		case 'P':
			flags |= HPZ_RELEASE_HOLES;
			break;
		case 'd':
			nd = strtoul(optarg, NULL, 10);
			break;
		case 'g':
			ng = strtoul(optarg, NULL, 10);
			break;
		case 't':
			nt = strtoul(optarg, NULL, 10);
			break;
		default:
			fprintf(stderr, "usage: upgrade-client [-P] [-d pages] "
			    "[-g pages] [-t pages] | hog\n");
			return (2);
		}
	if (ng == 0 || nt == 0)
		return (2);
	n = nd + ng + nt;

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_bus;
	sigaction(SIGBUS, &sa, NULL);

	if ((error = hpz_region_create(&r, n * PAGE, HPZ_PAGE_2M |
	    HPZ_NO_POOL)) != 0) {
		fprintf(stderr, "upgrade-client: hpz_region_create of %zu "
		    "pages: %s\n", n, hpz_strerror(error));
		return (77);
	}
	r.flags = flags;
	if ((error = hpz_register(&r)) != 0) {
		fprintf(stderr, "upgrade-client: hpz_register: %s\n",
		    hpz_last_error());
		return (1);
	}
	base = r.addr;
	for (i = 0; i < n; i++)
		if (page_fill(base, i, i < nd ? data_byte(i) :
		    GARBAGE_BYTE) != 0) {
			fprintf(stderr, "upgrade-client: SIGBUS writing page "
			    "%zu\n", i);
			return (1);
		}
	if (reset_pages(&r, nd, ng + nt) != 0)
		return (1);
	printf("pid %d\nready: %zu data, %zu cold garbage, %zu hot pages%s\n",
	    (int)getpid(), nd, ng, nt, flags & HPZ_RELEASE_HOLES ?
	    " (HPZ_RELEASE_HOLES: garbage punched when let go)" : "");
	fflush(stdout);

	/* Rounds over the hot pages until told to stop. */
	while (!stop) {
		t0 = now_ns();
		for (i = nd + ng; i < n; i++) {
			rc = page_check(base, i, 0, &wrong);
			if (rc == 1 && bad_pages++ == 0)
				fprintf(stderr, "upgrade-client: round %zu: hot "
				    "page %zu not zero after its reset\n",
				    rounds, i);
			if (rc == 2 || page_fill(base, i, GARBAGE_BYTE) != 0) {
				round_lost++;
				fprintf(stderr, "upgrade-client: round %zu: "
				    "SIGBUS on hot page %zu\n", rounds, i);
			}
		}
		t1 = now_ns();
		if (reset_pages(&r, nd + ng, nt) != 0)
			errors++;
		dt = now_ns() - t0;
		if (t1 - t0 > worst_touch)
			worst_touch = t1 - t0;
		if (dt - (t1 - t0) > worst_reset)
			worst_reset = dt - (t1 - t0);
		if (dt > worst) {
			worst = dt;
			worst_round = rounds;
		}
		rounds++;
		usleep(ROUND_NAP_US);
	}

	/* Every page, now that another process took every free one. */
	printf("checking %zu pages after %zu rounds\n", n, rounds);
	fflush(stdout);
	for (i = 0; i < n; i++) {
		rc = page_check(base, i, i < nd ? data_byte(i) : 0, &wrong);
		if (rc == 2) {
			lost++;
		} else if (rc == 1) {
			bad_pages++;
		}
	}
	printf("rounds %zu, longest stall %.3f ms (round %zu; longest touch "
	    "of the %zu hot pages %.3f ms, longest hpz_reset %.3f ms); pages "
	    "lost (SIGBUS): %zu of %zu; pages with wrong bytes: %zu (%zu "
	    "bytes); failed resets: %d; SIGBUS in rounds: %zu\n", rounds,
	    (double)worst / 1e6, worst_round, nt, (double)worst_touch / 1e6,
	    (double)worst_reset / 1e6, lost, n, bad_pages, wrong, errors,
	    round_lost);
	if (lost != 0 || bad_pages != 0 || errors != 0 || round_lost != 0) {
		printf("FAIL: the client lost pages or saw wrong bytes\n");
		return (1);
	}
	printf("PASS: data in %zu pages, zero in %zu garbage pages, no "
	    "SIGBUS\n", nd, ng + nt);
	return (0);
}
