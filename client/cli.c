/*
 * cli.c - the habits every client program shares: a bad command line said
 * in one shape, the socket option, the threads that touch a region at
 * once, the read-back that every byte hpzerod served is zero, and the
 * median/min/max of the runs.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>	/* isfinite, NAN: macros, no libm */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "hpz.h"
#include "size.h"
#include "cli.h"

#define CLI_BLOCK	4096UL	/* cli_nonzero ORs this much at a time */

const char	*cli_prog = "hpz";

/*
 * A bad command line: say what is wrong, then the usage (or, without one,
 * where to find it), exit 2.
 */
void
cli_usage_error(void (*usage)(FILE *), const char *fmt, ...)
{
	va_list	ap;

	fprintf(stderr, "%s: ", cli_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (usage != NULL)
		usage(stderr);
	else
		fprintf(stderr, "Try '%s -h' for help.\n", cli_prog);
	exit(CLI_EXIT_USAGE);
}

/*
 * getopt found a mistake (opterr is off): name it in our own words;
 * where ("stats: ") says which part of the command line it was in.
 */
void
cli_bad_option(void (*usage)(FILE *), const char *where, int ch,
    char **argv)
{
	const char	*arg = argv[optind - 1];

	if (ch == ':' && optopt != 0)
		cli_usage_error(usage, "%s-%c needs an argument", where,
		    optopt);
	if (ch == ':')
		cli_usage_error(usage, "%s%s needs an argument", where, arg);
	if (optopt != 0)
		cli_usage_error(usage, "%sunknown option -%c", where, optopt);
	cli_usage_error(usage, "%sunknown option %s", where, arg);
}

/* Nothing may follow the options, from argv[first] on ("stats: "). */
void
cli_no_more_args(void (*usage)(FILE *), const char *where, int first,
    int argc, char **argv)
{
	if (first < argc)
		cli_usage_error(usage, "%sunexpected argument '%s'", where,
		    argv[first]);
}

/* Parse a decimal int within [min, max]; 0 on success. */
int
cli_parse_int(const char *s, int min, int max, int *out)
{
	long	 v;
	char	*end;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
		return (-1);
	*out = (int)v;
	return (0);
}

/* Option -opt's number of unit, within [min, max], or exit 2. */
int
cli_int_arg(void (*usage)(FILE *), int opt, const char *arg, int min,
    int max, const char *unit)
{
	int	 v;

	if (cli_parse_int(arg, min, max, &v) != 0)
		cli_usage_error(usage, "-%c: want %d to %d %s, not '%s'", opt,
		    min, max, unit, arg);
	return (v);
}

/* Option -opt's size ("64M"), 1 to max bytes, or exit 2. */
size_t
cli_size_arg(void (*usage)(FILE *), int opt, const char *arg, uint64_t max)
{
	size_t	 v;

	if (size_parse_max(arg, max, &v) != 0)
		cli_usage_error(usage, "-%c: bad size '%s'", opt, arg);
	return (v);
}

/* -s socket: libhpz reads the socket from $HPZ_SOCKET. */
void
cli_socket_option(void (*usage)(FILE *), const char *path)
{
	if (*path == '\0')
		cli_usage_error(usage, "-s: empty socket path");
	if (setenv("HPZ_SOCKET", path, 1) != 0) {
		fprintf(stderr, "%s: setenv: %s\n", cli_prog, strerror(errno));
		exit(CLI_EXIT_FAIL);
	}
}

/* The socket libhpz will use, for messages. */
const char *
cli_socket(void)
{
	const char	*path;

	path = getenv("HPZ_SOCKET");
	if (path == NULL || *path == '\0')
		path = HPZ_SOCKET_DEFAULT;
	return (path);
}

/* Zeroed memory, or exit: nothing useful is left to do without it. */
void *
cli_alloc(size_t len)
{
	void	*p;

	if ((p = calloc(1, len == 0 ? 1 : len)) == NULL) {
		fprintf(stderr, "%s: out of memory\n", cli_prog);
		exit(CLI_EXIT_FAIL);
	}
	return (p);
}

/* The barrier that starts a touch's n threads at once, or exit. */
void
cli_barrier_init(pthread_barrier_t *barrier, unsigned int n)
{
	int	 error;

	if ((error = pthread_barrier_init(barrier, NULL, n)) != 0) {
		fprintf(stderr, "%s: pthread_barrier_init: %s\n", cli_prog,
		    strerror(error));
		exit(CLI_EXIT_FAIL);
	}
}

/*
 * Start touching thread i, named for the program; exit if it cannot be
 * made: the others already wait on the barrier, forever.
 */
void
cli_thread_start(pthread_t *tid, void *(*fn)(void *), void *arg, int i)
{
	char	 name[16];	/* the kernel's limit, with the NUL */
	int	 error;

	if ((error = pthread_create(tid, NULL, fn, arg)) != 0) {
		fprintf(stderr, "%s: pthread_create: %s\n", cli_prog,
		    strerror(error));
		exit(CLI_EXIT_FAIL);
	}
	/* The callers' thread limits are below 10000: "hpz-bench-255". */
	snprintf(name, sizeof name, "%s-%d", cli_prog, i % 10000);
	pthread_setname_np(*tid, name);
}

/*
 * How many of the len bytes at addr (a multiple of 4 KiB) are not zero,
 * and the first of them (offset, value): OR a 4 KiB block a word at a
 * time, and only look at the bytes of a block that is not all zero.
 */
size_t
cli_nonzero(const void *addr, size_t len, size_t *first,
    unsigned int *firstval)
{
	const unsigned char	*base = addr;
	const uint64_t		*w;
	uint64_t		 acc;
	size_t			 off, j, bad = 0;

	*first = 0;
	*firstval = 0;
	for (off = 0; off < len; off += CLI_BLOCK) {
		w = (const uint64_t *)(const void *)(base + off);
		acc = 0;
		for (j = 0; j < CLI_BLOCK / sizeof *w; j++)
			acc |= w[j];
		if (acc == 0)
			continue;
		for (j = 0; j < CLI_BLOCK; j++) {
			if (base[off + j] == 0)
				continue;
			if (bad++ == 0) {
				*first = off + j;
				*firstval = base[off + j];
			}
		}
	}
	return (bad);
}

/* qsort order for doubles. */
int
cli_cmp(const void *a, const void *b)
{
	double	 x = *(const double *)a, y = *(const double *)b;

	return ((x > y) - (x < y));
}

/* Nearest-rank percentile p (0-1] of v[0..n), which it sorts. */
double
cli_pct(double *v, size_t n, double p)
{
	size_t	 rank;

	qsort(v, n, sizeof *v, cli_cmp);
	rank = (size_t)(p * (double)n);
	if ((double)rank < p * (double)n)
		rank++;
	if (rank < 1)
		rank = 1;
	return (v[(rank > n ? n : rank) - 1]);
}

/*
 * Median, min and max of the n figures that are finite (a run without a
 * figure holds NAN); NAN when there are none.  v is left as it is.
 */
void
cli_stats(const double *v, int n, double *med, double *min, double *max)
{
	double	*s;
	int	 i, k = 0;

	s = cli_alloc((size_t)(n > 0 ? n : 1) * sizeof *s);
	for (i = 0; i < n; i++)
		if (isfinite(v[i]))
			s[k++] = v[i];
	n = k;
	if (n == 0) {
		*med = *min = *max = NAN;
		free(s);
		return;
	}
	qsort(s, (size_t)n, sizeof *s, cli_cmp);
	*min = s[0];
	*max = s[n - 1];
	*med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2.0;
	free(s);
}

/*
 * What a VMM maps without hpzerod, for the kernel's reference figures: a
 * fresh memfd_create(MFD_HUGETLB) file of len bytes of huge pages of
 * hugeflag (MFD_HUGE_2MB, MFD_HUGE_1GB; 0: shmem pages, no MFD_HUGETLB),
 * mapped MAP_SHARED and served by the kernel's own first-touch faults.
 * NULL with errno set.
 */
void *
cli_kernel_map(size_t len, unsigned int hugeflag)
{
	void	*p;
	int	 fd, saved;

	fd = memfd_create("hpz-kernel-reference", MFD_CLOEXEC |
	    (hugeflag != 0 ? MFD_HUGETLB | hugeflag : 0));
	if (fd == -1)
		return (NULL);
	if (ftruncate(fd, (off_t)len) == -1) {
		saved = errno;
		close(fd);
		errno = saved;
		return (NULL);
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	saved = errno;
	close(fd);
	errno = saved;
	return (p == MAP_FAILED ? NULL : p);
}
