/*
 * numa-client.c - the checks of tests/numa/numa.sh, run inside a guest with
 * two NUMA nodes (node 0: CPU 0, node 1: CPU 1) against the hpzerod whose
 * pid is argv[1], started with a pool of 2 MiB pages on each node.  Each
 * check prints "NUMA PASS name: ..." or "NUMA FAIL name: ..."; the exit
 * status is the number of failures.
 *
 *   pool-ready      each node's pool fills to its size
 *   pool-on-node    the huge pages each node has in use are its pool's
 *   fillers         every filler is bound to one node (CPUs and memory),
 *                   and each node has one
 *   workers         every fault worker is pinned to a CPU and prefers its
 *                   node's memory, and each node has one
 *   scrub-threads   every background thread is pinned to a CPU and
 *                   prefers its node's memory
 *   pool-region     a client bound to node 1 gets a pool file of node 1:
 *                   its region's pages are on node 1 (numa_maps)
 *   fault-region    the same client's region without the pool, every fault
 *                   served by the daemon: its pages are on node 1
 *   ahead-region    the same with HPZ_AHEAD_EAGER, allocated ahead by the
 *                   background threads: its pages are on node 1
 *   both-nodes      a process bound to node 0 and one bound to node 1 fault
 *                   their regions at once, a few rounds: each one's pages
 *                   are on its node (a worker busy with one node's faults
 *                   takes none of the other's)
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <hpz.h>

#define NODES		2
#define PAGE_2M		(2UL << 20)
#define REGION_LEN	(16UL << 20)	/* 8 pages */
#define WAIT_S		90		/* a liveness bound, under TCG */
#define MPOL_BIND_	2		/* <numaif.h>, without libnuma */
#define BOTH_LEN	(32UL << 20)	/* both-nodes: 16 pages a process */
#define BOTH_ROUNDS	4

static int	failures;
static pid_t	daemon_pid;

static void
check(int ok, const char *name, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	printf("NUMA %s %s: ", ok ? "PASS" : "FAIL", name);
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	va_end(ap);
	if (!ok)
		failures++;
}

static void
nap(int ms)
{
	struct timespec	ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* The first line of path without its newline in buf; -1 if none. */
static int
read_line(const char *path, char *buf, size_t len)
{
	FILE	*f;
	int	 rc = -1;

	if ((f = fopen(path, "r")) == NULL)
		return (-1);
	if (fgets(buf, (int)len, f) != NULL) {
		buf[strcspn(buf, "\n")] = '\0';
		rc = 0;
	}
	fclose(f);
	return (rc);
}

static long
read_long(const char *path)
{
	char	buf[64];

	return (read_line(path, buf, sizeof(buf)) == 0 ? atol(buf) : -1);
}

/* Parse a CPU list ("0-1,3") into a bit mask (CPUs < 64). */
static unsigned long long
parse_list(const char *s)
{
	unsigned long long	mask = 0;
	long			a, b, i;
	char		       *end;

	while (*s != '\0') {
		a = strtol(s, &end, 10);
		if (end == s)
			break;
		b = a;
		s = end;
		if (*s == '-') {
			b = strtol(s + 1, &end, 10);
			s = end;
		}
		for (i = a; i <= b && i < 64; i++)
			mask |= 1ULL << i;
		if (*s == ',')
			s++;
		else
			break;
	}
	return (mask);
}

static unsigned long long	node_cpus[NODES];

/* The node whose CPUs include every CPU of mask, or -1. */
static int
node_of_cpus(unsigned long long mask)
{
	int	n;

	for (n = 0; n < NODES; n++)
		if (mask != 0 && (mask & ~node_cpus[n]) == 0)
			return (n);
	return (-1);
}

/* Huge pages (2 MiB) in use on node n. */
static long
node_used(int n)
{
	char	path[128];
	long	nr, fr;

	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/"
	    "hugepages/hugepages-2048kB/nr_hugepages", n);
	nr = read_long(path);
	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/"
	    "hugepages/hugepages-2048kB/free_hugepages", n);
	fr = read_long(path);
	return (nr < 0 || fr < 0 ? -1 : nr - fr);
}

/* The daemon's 2 MiB pools by node; 0, or -1. */
static int
pools(struct hpz_pool_info *by_node)
{
	struct hpz_pool_info	info[16];
	size_t			count, i;

	memset(by_node, 0, NODES * sizeof(*by_node));
	if (hpz_pool_status(info, 16, &count) != 0)
		return (-1);
	for (i = 0; i < count && i < 16; i++)
		if (info[i].page_size == PAGE_2M && info[i].node >= 0 &&
		    info[i].node < NODES)
			by_node[info[i].node] = info[i];
	return (0);
}

static void
check_pools(void)
{
	struct hpz_pool_info	p[NODES];
	long			used[NODES];
	int			i, n, full = 0, match = 0;

	for (i = 0; i < WAIT_S * 10 && !full; i++) {
		full = pools(p) == 0;
		for (n = 0; n < NODES; n++)
			full = full && p[n].target_pages > 0 &&
			    p[n].ready_pages == p[n].target_pages;
		if (!full)
			nap(100);
	}
	check(full, "pool-ready", "node 0: %llu of %llu pages, node 1: %llu "
	    "of %llu", p[0].ready_pages, p[0].target_pages, p[1].ready_pages,
	    p[1].target_pages);
	if (!full)
		return;
	/* What the daemon measured at its start may hold pages a while. */
	for (i = 0; i < 100 && !match; i++) {
		match = 1;
		for (n = 0; n < NODES; n++) {
			used[n] = node_used(n);
			match = match && used[n] == (long)p[n].ready_pages;
		}
		if (!match)
			nap(100);
	}
	check(match, "pool-on-node", "huge pages in use: node 0 %ld (its "
	    "pool %llu), node 1 %ld (its pool %llu)", used[0],
	    p[0].ready_pages, used[1], p[1].ready_pages);
}

/*
 * The daemon's threads whose name starts with prefix: each must be on the
 * CPUs of one node and have a memory policy naming that node (policy:
 * "bind" or "prefer"; pinned: on one CPU exactly); each node must have one
 * unless some_node.
 */
static void
check_threads(const char *name, const char *prefix, const char *policy,
    int pinned, int some_node)
{
	char			 dir[64], path[384], comm[32], line[512], why[256];
	char			 want[32], *p;
	struct dirent		*de;
	DIR			*d;
	FILE			*f;
	unsigned long long	 cpus;
	int			 node, per_node[NODES] = { 0 }, ok = 1, seen = 0;
	int			 n;

	why[0] = '\0';
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)daemon_pid);
	if ((d = opendir(dir)) == NULL) {
		check(0, name, "%s: %s", dir, strerror(errno));
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "%s/%s/comm", dir, de->d_name);
		if (read_line(path, comm, sizeof(comm)) != 0 ||
		    strncmp(comm, prefix, strlen(prefix)) != 0)
			continue;
		seen++;
		cpus = 0;
		snprintf(path, sizeof(path), "%s/%s/status", dir, de->d_name);
		if ((f = fopen(path, "r")) != NULL) {
			while (fgets(line, sizeof(line), f) != NULL)
				if (strncmp(line, "Cpus_allowed_list:", 18) ==
				    0)
					cpus = parse_list(line + 18 +
					    strspn(line + 18, " \t"));
			fclose(f);
		}
		node = node_of_cpus(cpus);
		/* The task's policy: numa_maps says it for every mapping
		 * without one of its own (the daemon sets none). */
		snprintf(path, sizeof(path), "%s/%s/numa_maps", dir,
		    de->d_name);
		line[0] = '\0';
		read_line(path, line, sizeof(line));
		p = strchr(line, ' ');
		p = p != NULL ? p + 1 : line;
		p[strcspn(p, " ")] = '\0';
		snprintf(want, sizeof(want), "%s:%d", policy, node);
		printf("NUMA thread %s (%s): CPUs 0x%llx, node %d, policy "
		    "%s\n", comm, de->d_name, cpus, node, p);
		if (node < 0 || (pinned && (cpus & (cpus - 1)) != 0) ||
		    strcmp(p, want) != 0) {
			if (ok)
				snprintf(why, sizeof(why), "%s: CPUs 0x%llx "
				    "(node %d), policy \"%s\", wanted %s%s",
				    comm, cpus, node, p, pinned ? "one CPU "
				    "and " : "", want);
			ok = 0;
		} else
			per_node[node]++;
	}
	closedir(d);
	fflush(stdout);
	if (seen == 0) {
		check(0, name, "no thread named %s*", prefix);
		return;
	}
	if (ok && !some_node)
		for (n = 0; n < NODES; n++)
			if (per_node[n] == 0) {
				snprintf(why, sizeof(why), "no %s* thread on "
				    "node %d", prefix, n);
				ok = 0;
			}
	if (ok)
		snprintf(why, sizeof(why), "%d on node 0, %d on node 1",
		    per_node[0], per_node[1]);
	check(ok, name, "%s", why);
}

/* Pages of the mapping at addr on each node, from /proc/self/numa_maps;
 * its policy in pol. */
static int
placed(const void *addr, long *on, char *pol, size_t pollen, int verbose)
{
	char	 line[1024], *tok, *save;
	FILE	*f;
	int	 n, found = 0;

	memset(on, 0, NODES * sizeof(*on));
	pol[0] = '\0';
	if ((f = fopen("/proc/self/numa_maps", "r")) == NULL)
		return (-1);
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		if (strtoull(line, NULL, 16) != (unsigned long long)(uintptr_t)
		    addr)
			continue;
		found = 1;
		if (verbose)
			printf("NUMA numa_maps: %s", line);
		tok = strtok_r(line, " \n", &save);
		if ((tok = strtok_r(NULL, " \n", &save)) != NULL)
			snprintf(pol, pollen, "%s", tok);
		while ((tok = strtok_r(NULL, " \n", &save)) != NULL)
			if (tok[0] == 'N' && sscanf(tok + 1, "%d=", &n) == 1 &&
			    n >= 0 && n < NODES)
				on[n] = atol(strchr(tok, '=') + 1);
	}
	fclose(f);
	fflush(stdout);
	return (found ? 0 : -1);
}

/* The daemon's record of the region at addr; 0, or -1. */
static int
region_info(const void *addr, struct hpz_region_info *out)
{
	struct hpz_region_info	info[32];
	size_t			count, i;

	if (hpz_list_regions(info, 32, &count) != 0)
		return (-1);
	for (i = 0; i < count && i < 32; i++)
		if (info[i].addr == (unsigned long long)(uintptr_t)addr &&
		    info[i].pid == (int)getpid()) {
			*out = info[i];
			return (0);
		}
	return (-1);
}

/* Write every page of r. */
static void
touch(const struct hpz_region *r)
{
	size_t	off;

	for (off = 0; off < r->len; off += PAGE_2M)
		((volatile char *)r->addr)[off + 64] = 1;
}

/*
 * A region of this client (bound to node 1) made with flags: all its
 * pages must be on node 1.
 */
static void
check_region(const char *name, unsigned int flags)
{
	struct hpz_pool_info	before[NODES], after[NODES];
	struct hpz_region_info	ri;
	struct hpz_region	r;
	char			pol[32], extra[160];
	long			on[NODES], want = REGION_LEN / PAGE_2M;
	int			i, error, have = 0;

	memset(&ri, 0, sizeof(ri));
	pools(before);
	if ((error = hpz_region_create(&r, REGION_LEN, flags)) != 0) {
		check(0, name, "hpz_region_create: %s", hpz_last_error());
		return;
	}
	if ((error = hpz_register(&r)) != 0) {
		check(0, name, "hpz_register: %s", hpz_last_error());
		hpz_region_destroy(&r);
		return;
	}
	/* Ahead: wait for the background threads to allocate and map it
	 * all (the pages they premap show in numa_maps). */
	if (flags & HPZ_AHEAD_EAGER)
		for (i = 0; i < WAIT_S * 10; i++) {
			if (placed(r.addr, on, pol, sizeof(pol), 0) == 0 &&
			    on[0] + on[1] == want)
				break;
			nap(100);
		}
	touch(&r);
	extra[0] = '\0';
	/*
	 * The daemon counts a fault once it has woken the faulting thread,
	 * and a page allocated ahead once it is mapped: its counters may
	 * trail what we see by a moment (ASan, TCG, a loaded host).
	 */
	for (i = 0; i < WAIT_S * 10; i++) {
		if (region_info(r.addr, &ri) != 0 ||
		    ((flags & HPZ_AHEAD_EAGER) ? ri.bg_pages_pending == 0 :
		    (flags & HPZ_NO_POOL) == 0 ||
		    ri.faults >= (unsigned long long)want))
			break;
		nap(100);
	}
	if (region_info(r.addr, &ri) == 0) {
		snprintf(extra, sizeof(extra), "; the daemon: %llu faults, "
		    "%llu pages populated, %llu cleared, %llu pending", ri.faults,
		    ri.pages_populated, ri.pages_cleared, ri.bg_pages_pending);
		have = 1;
	}
	if (placed(r.addr, on, pol, sizeof(pol), 1) != 0)
		check(0, name, "no line for %p in numa_maps", r.addr);
	else if (strcmp(pol, "bind:1") != 0)
		check(0, name, "policy %s, not bind:1", pol);
	else if ((flags & HPZ_NO_POOL) == 0) {
		pools(after);
		check(on[1] == want && on[0] == 0 &&
		    after[1].handouts == before[1].handouts + 1 &&
		    after[0].handouts == before[0].handouts, name,
		    "%ld pages on node 0, %ld on node 1 (of %ld); pool "
		    "files handed out: node 0 %llu, node 1 %llu (%llu "
		    "before)%s", on[0], on[1], want, after[0].handouts,
		    after[1].handouts, before[1].handouts, extra);
	} else if (flags & HPZ_AHEAD_EAGER)
		check(on[1] == want && on[0] == 0 && have &&
		    ri.bg_pages_pending == 0, name, "%ld pages on node 0, %ld "
		    "on node 1 (of %ld)%s", on[0], on[1], want, extra);
	else
		check(on[1] == want && on[0] == 0 && have &&
		    ri.faults >= (unsigned long long)want, name,
		    "%ld pages on node 0, %ld on node 1 (of %ld)%s", on[0],
		    on[1], want, extra);
	hpz_region_destroy(&r);
}

static int
bind_node(int node)
{
	unsigned long	mask = 1UL << node;

	return ((int)syscall(SYS_set_mempolicy, MPOL_BIND_, &mask,
	    8 * sizeof(mask)));
}

/*
 * One process's rounds of both-nodes, bound to node: each round a fresh
 * region faulted through the daemon, a byte on ready once it is registered,
 * touched when a byte comes on go; a line on out when its pages went
 * elsewhere.  How many rounds went wrong.
 */
static int
both_rounds(int node, int go, int ready, FILE *out)
{
	struct hpz_region	r;
	char			pol[32], c;
	long			on[NODES], want = BOTH_LEN / PAGE_2M;
	int			round, bad = 0;

	if (bind_node(node) == -1) {
		fprintf(out, "node %d: set_mempolicy: %s\n", node,
		    strerror(errno));
		return (BOTH_ROUNDS);
	}
	for (round = 0; round < BOTH_ROUNDS; round++) {
		if (hpz_region_create(&r, BOTH_LEN, HPZ_PAGE_2M |
		    HPZ_NO_POOL) != 0 || hpz_register(&r) != 0) {
			fprintf(out, "node %d round %d: %s\n", node, round,
			    hpz_last_error());
			fflush(out);
			/* The rounds left are lost, not waited for. */
			bad += BOTH_ROUNDS - round;
			for (; round < BOTH_ROUNDS; round++)
				(void)!write(ready, "r", 1);
			return (bad);
		}
		if (write(ready, "r", 1) != 1 || read(go, &c, 1) != 1)
			c = 0;
		touch(&r);
		if (placed(r.addr, on, pol, sizeof(pol), 0) != 0 ||
		    on[node] != want || on[!node] != 0) {
			fprintf(out, "node %d round %d: %ld pages on node 0, "
			    "%ld on node 1 (of %ld)\n", node, round, on[0],
			    on[1], want);
			bad++;
		}
		hpz_region_destroy(&r);
	}
	fflush(out);
	return (bad);
}

static void
both_exec(int node, int go, int ready, int out)
{
	char	a[4][16];

	snprintf(a[0], sizeof(a[0]), "%d", node);
	snprintf(a[1], sizeof(a[1]), "%d", go);
	snprintf(a[2], sizeof(a[2]), "%d", ready);
	snprintf(a[3], sizeof(a[3]), "%d", out);
	execl("/proc/self/exe", "numa-client", "--both", a[0], a[1], a[2],
	    a[3], (char *)NULL);
	_exit(BOTH_ROUNDS);
}

static void
check_both(void)
{
	char	 line[256], why[512] = "";
	FILE	*f;
	pid_t	 kid;
	char	 c[2];
	int	 go0[2], go1[2], ready[2], st, bad, round;

	if (pipe(go0) == -1 || pipe(go1) == -1 || pipe(ready) == -1 ||
	    (f = tmpfile()) == NULL) {
		check(0, "both-nodes", "pipe: %s", strerror(errno));
		return;
	}
	if ((kid = fork()) == -1) {
		check(0, "both-nodes", "fork: %s", strerror(errno));
		return;
	}
	/* A new program: libhpz's connection is not for two processes. */
	if (kid == 0) {
		close(go1[0]);
		close(go1[1]);
		close(go0[1]);
		close(ready[0]);
		both_exec(0, go0[0], ready[1], fileno(f));
	}
	close(go0[0]);
	if (fork() == 0) {
		close(go1[1]);
		close(go0[1]);
		close(ready[0]);
		both_exec(1, go1[0], ready[1], fileno(f));
	}
	close(go1[0]);
	close(ready[1]);
	signal(SIGPIPE, SIG_IGN);	/* a process that gave up */
	/* Both touch at once, round after round, once both registered. */
	for (round = 0; round < BOTH_ROUNDS; round++) {
		if (read(ready[0], c, 1) != 1 || read(ready[0], c + 1, 1) != 1 ||
		    write(go0[1], "g", 1) != 1 || write(go1[1], "g", 1) != 1)
			break;
	}
	close(ready[0]);
	close(go0[1]);
	close(go1[1]);
	bad = 0;
	while (wait(&st) > 0)
		bad += WIFEXITED(st) ? WEXITSTATUS(st) : BOTH_ROUNDS;
	fflush(f);
	rewind(f);
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if (strlen(why) + strlen(line) + 3 < sizeof(why))
			strcat(strcat(why, why[0] ? "; " : ""), line);
	}
	fclose(f);
	check(bad == 0, "both-nodes", "%d of %d rounds a process with a page "
	    "off its node%s%s", bad, 2 * BOTH_ROUNDS, why[0] ? ": " : "",
	    why);
}

int
main(int argc, char *argv[])
{
	unsigned long	mask = 1UL << 1;
	char		path[128], buf[256];
	int		n;

	FILE		*out;

	if (argc == 6 && strcmp(argv[1], "--both") == 0) {
		if ((out = fdopen(atoi(argv[5]), "a")) == NULL)
			return (BOTH_ROUNDS);
		return (both_rounds(atoi(argv[2]), atoi(argv[3]),
		    atoi(argv[4]), out));
	}
	if (argc != 2) {
		fprintf(stderr, "usage: numa-client daemon-pid\n");
		return (64);
	}
	daemon_pid = (pid_t)atoi(argv[1]);
	for (n = 0; n < NODES; n++) {
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/"
		    "cpulist", n);
		if (read_line(path, buf, sizeof(buf)) != 0) {
			check(0, "topology", "%s: %s", path, strerror(errno));
			return (failures);
		}
		node_cpus[n] = parse_list(buf);
	}
	check(node_cpus[0] != 0 && node_cpus[1] != 0 &&
	    (node_cpus[0] & node_cpus[1]) == 0, "topology",
	    "node 0: CPUs 0x%llx, node 1: CPUs 0x%llx", node_cpus[0],
	    node_cpus[1]);

	check_pools();
	check_threads("fillers", "hpz-pool", "bind", 0, 0);
	check_threads("workers", "hpz-worker", "prefer", 1, 0);
	check_threads("scrub-threads", "hpz-scrub", "prefer", 1, 0);

	/* From here on, this client's memory is node 1's. */
	if (syscall(SYS_set_mempolicy, MPOL_BIND_, &mask, 8 * sizeof(mask)) ==
	    -1) {
		check(0, "bind", "set_mempolicy: %s", strerror(errno));
		return (failures);
	}
	check_region("pool-region", HPZ_PAGE_2M);
	check_region("fault-region", HPZ_PAGE_2M | HPZ_NO_POOL);
	check_region("ahead-region", HPZ_PAGE_2M | HPZ_NO_POOL |
	    HPZ_AHEAD_EAGER);
	check_both();
	printf("NUMA client failures %d\n", failures);
	return (failures);
}
