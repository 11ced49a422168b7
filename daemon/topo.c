/*
 * topo.c - the machine's shape: online CPUs, their NUMA nodes (libnuma)
 * and the last-level cache share (sysfs), which sizes every clear extent.
 * The sysfs root is a parameter so tests can feed a fake tree.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <numa.h>

#include "topo.h"

struct topo	topo;

/*
 * Read a small sysfs or proc file into buf, in one read, without its
 * trailing blanks: its length, or -1.  No allocation: the fault path reads
 * /proc with it (uffd_thread_cpu).
 */
ssize_t
topo_read_file(const char *path, char *buf, size_t len)
{
	ssize_t	n;
	int	fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (-1);
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return (-1);
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return (n);
}

/*
 * Parse a CPU list such as "0-3,8,10-11" into set[] (set[i] = 1).
 * Returns how many were set, or -1 if the list is malformed.
 */
int
topo_parse_list(const char *list, int *set, int max)
{
	const char	*p = list;
	char		*end;
	long		 a, b, i;
	int		 count = 0;

	while (*p != '\0') {
		a = strtol(p, &end, 10);
		if (end == p || a < 0)
			return (-1);
		b = a;
		p = end;
		if (*p == '-') {
			b = strtol(p + 1, &end, 10);
			if (end == p + 1 || b < a)
				return (-1);
			p = end;
		}
		for (i = a; i <= b && i < max; i++) {
			if (!set[i])
				count++;
			set[i] = 1;
		}
		if (*p == ',')
			p++;
		else if (*p != '\0')
			return (-1);
	}
	return (count);
}

/* Parse "32768K", "2M", "1G" or plain bytes. */
static int
topo_parse_size(const char *s, uint64_t *out)
{
	char		*end;
	unsigned long long v;

	v = strtoull(s, &end, 10);
	if (end == s)
		return (-1);
	switch (*end) {
	case 'K': case 'k':
		v <<= 10;
		break;
	case 'M': case 'm':
		v <<= 20;
		break;
	case 'G': case 'g':
		v <<= 30;
		break;
	case '\0':
		break;
	default:
		return (-1);
	}
	*out = v;
	return (0);
}

/*
 * The last-level cache of cpu: the highest-level data or unified cache
 * under root/sys/devices/system/cpu/cpuN/cache.  0, or -1 if none is found.
 */
int
topo_read_llc(const char *root, int cpu, uint64_t *size, int *sharing)
{
	char	 path[512], buf[4096];
	int	 idx, level, best = -1, *set;
	uint64_t sz;

	if ((set = calloc(TOPO_CPUS_MAX, sizeof(*set))) == NULL)
		return (-1);
	for (idx = 0; idx < 16; idx++) {
		snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/cpu%d/"
		    "cache/index%d/type", root, cpu, idx);
		if (topo_read_file(path, buf, sizeof(buf)) == -1)
			break;
		if (strcmp(buf, "Data") != 0 && strcmp(buf, "Unified") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/cpu%d/"
		    "cache/index%d/level", root, cpu, idx);
		if (topo_read_file(path, buf, sizeof(buf)) == -1)
			continue;
		level = atoi(buf);
		if (level <= best)
			continue;
		snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/cpu%d/"
		    "cache/index%d/size", root, cpu, idx);
		if (topo_read_file(path, buf, sizeof(buf)) == -1 ||
		    topo_parse_size(buf, &sz) == -1 || sz == 0)
			continue;
		snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/cpu%d/"
		    "cache/index%d/shared_cpu_list", root, cpu, idx);
		memset(set, 0, TOPO_CPUS_MAX * sizeof(*set));
		if (topo_read_file(path, buf, sizeof(buf)) == -1 ||
		    (*sharing = topo_parse_list(buf, set, TOPO_CPUS_MAX)) <= 0)
			*sharing = 1;
		*size = sz;
		best = level;
	}
	free(set);
	return (best == -1 ? -1 : 0);
}

/*
 * Learn the machine: CPUs online and LLC from root's sysfs ("" for the
 * real one), nodes from libnuma on the real machine or from root's
 * node directories on a fake one.
 */
int
topo_init(struct topo *t, const char *root)
{
	char	path[512], buf[4096];
	int	cpu, node, *set;

	memset(t, 0, sizeof(*t));
	snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/online", root);
	if (topo_read_file(path, buf, sizeof(buf)) == -1 ||
	    topo_parse_list(buf, t->cpu_online, TOPO_CPUS_MAX) <= 0)
		return (-1);
	for (cpu = 0; cpu < TOPO_CPUS_MAX; cpu++)
		if (t->cpu_online[cpu])
			t->ncpus = cpu + 1;

	t->nnodes = 1;
	if (root[0] == '\0' && numa_available() != -1) {
		t->nnodes = numa_max_node() + 1;
		for (cpu = 0; cpu < t->ncpus; cpu++) {
			node = t->cpu_online[cpu] ? numa_node_of_cpu(cpu) : 0;
			t->cpu_node[cpu] = node < 0 ? 0 : node;
		}
	} else if ((set = calloc(TOPO_CPUS_MAX, sizeof(*set))) != NULL) {
		for (node = 0; node < TOPO_NODES_MAX; node++) {
			snprintf(path, sizeof(path), "%s/sys/devices/system/"
			    "node/node%d/cpulist", root, node);
			if (topo_read_file(path, buf, sizeof(buf)) == -1)
				continue;
			memset(set, 0, TOPO_CPUS_MAX * sizeof(*set));
			if (topo_parse_list(buf, set, TOPO_CPUS_MAX) < 0)
				continue;
			for (cpu = 0; cpu < TOPO_CPUS_MAX; cpu++)
				if (set[cpu])
					t->cpu_node[cpu] = node;
			if (node + 1 > t->nnodes)
				t->nnodes = node + 1;
		}
		free(set);
	}

	for (cpu = 0; cpu < t->ncpus && !t->cpu_online[cpu]; cpu++)
		;
	if (topo_read_llc(root, cpu, &t->llc_size, &t->llc_sharing) == -1) {
		t->llc_size = 8ULL << 20;	/* a guess, said in the log */
		t->llc_sharing = 1;
	}
	t->llc_share = t->llc_size / (uint64_t)t->llc_sharing;
	return (0);
}

/* Online CPUs of the machine (at least one). */
int
topo_online(void)
{
	int	cpu, n = 0;

	for (cpu = 0; cpu < topo.ncpus && cpu < TOPO_CPUS_MAX; cpu++)
		if (topo.cpu_online[cpu])
			n++;
	return (n > 0 ? n : 1);
}
