/*
 * test-topo.c - unit tests of the machine's shape (topo.c): CPU lists
 * and the caches and nodes read from a fake sysfs tree.
 */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <criterion/criterion.h>

#include "plan.h"
#include "topo.h"

#define KiB		1024ULL
#define MiB		(1024ULL * KiB)

/* --- topo_parse_list ---------------------------------------------------- */

Test(topo, parse_list_valid)
{
	int	set[16];

	memset(set, 0, sizeof(set));
	cr_expect_eq(topo_parse_list("0", set, 16), 1);
	cr_expect_eq(set[0], 1);
	cr_expect_eq(set[1], 0);

	memset(set, 0, sizeof(set));
	cr_expect_eq(topo_parse_list("0-3", set, 16), 4);
	cr_expect(set[0] && set[1] && set[2] && set[3] && !set[4]);

	memset(set, 0, sizeof(set));
	cr_expect_eq(topo_parse_list("0-1,4,6-7", set, 16), 5);
	cr_expect(set[0] && set[1] && !set[2] && !set[3] && set[4] &&
	    !set[5] && set[6] && set[7] && !set[8]);

	/* A CPU named twice is counted once. */
	memset(set, 0, sizeof(set));
	cr_expect_eq(topo_parse_list("2,2,1-3", set, 16), 3);
}

Test(topo, parse_list_malformed)
{
	static const char	*bad[] = { "a", "3-1", "1,,2", "-1", "1-",
				    "1-3-5", "0x1", "1;2", ",1" };
	int			set[16];
	size_t			i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(set, 0, sizeof(set));
		cr_expect_eq(topo_parse_list(bad[i], set, 16), -1,
		    "\"%s\" accepted", bad[i]);
	}
}

Test(topo, parse_list_respects_max)
{
	int	set[9];

	memset(set, 0, sizeof(set));
	set[8] = 42;	/* a canary just past max */
	cr_expect_eq(topo_parse_list("0-100", set, 8), 8);
	cr_expect_eq(set[8], 42);
	memset(set, 0, sizeof(set));
	set[8] = 42;
	cr_expect_eq(topo_parse_list("6-7,8,200", set, 8), 2);
	cr_expect_eq(set[8], 42);
	cr_expect_eq(topo_parse_list("99999999999999999999", set, 8), 0);
}

/* --- a fake sysfs tree -------------------------------------------------- */

static char	fake_root[256];

/* Write root/rel, making its directories. */
static void
fake_put(const char *rel, const char *text)
{
	char	path[PATH_MAX], *p;
	FILE	*f;

	cr_assert_lt((size_t)snprintf(path, sizeof(path), "%s/%s", fake_root,
	    rel), sizeof(path));
	for (p = path + strlen(fake_root) + 1; (p = strchr(p, '/')) != NULL;
	    p++) {
		*p = '\0';
		cr_assert(mkdir(path, 0755) == 0 || errno == EEXIST,
		    "mkdir %s: %s", path, strerror(errno));
		*p = '/';
	}
	f = fopen(path, "w");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	fprintf(f, "%s\n", text);
	cr_assert_eq(fclose(f), 0);
}

static void
fake_cache(int cpu, int index, const char *level, const char *type,
    const char *size, const char *shared)
{
	char	rel[256], base[128];

	snprintf(base, sizeof(base), "sys/devices/system/cpu/cpu%d/cache/"
	    "index%d", cpu, index);
	snprintf(rel, sizeof(rel), "%s/level", base);
	fake_put(rel, level);
	snprintf(rel, sizeof(rel), "%s/type", base);
	fake_put(rel, type);
	snprintf(rel, sizeof(rel), "%s/size", base);
	fake_put(rel, size);
	snprintf(rel, sizeof(rel), "%s/shared_cpu_list", base);
	fake_put(rel, shared);
}

/* The caches of one CPU: L1d, L1i, L2 of its own, L3 of its group. */
static void
fake_cpu(int cpu, const char *l3size, const char *l3shared)
{
	char	self[16];

	snprintf(self, sizeof(self), "%d", cpu);
	fake_cache(cpu, 0, "1", "Data", "48K", self);
	/* Bigger and higher than anything: must be ignored. */
	fake_cache(cpu, 1, "4", "Instruction", "1G", "0-7");
	fake_cache(cpu, 2, "2", "Unified", "2048K", self);
	fake_cache(cpu, 3, "3", "Unified", l3size, l3shared);
}

static void
fake_node(int node, const char *cpulist)
{
	char	rel[128];

	snprintf(rel, sizeof(rel), "sys/devices/system/node/node%d/cpulist",
	    node);
	fake_put(rel, cpulist);
}

/* Two nodes of four CPUs, one 32 MiB L3 per node. */
static void
fake_two_nodes(const char *l3size)
{
	int	cpu;

	fake_put("sys/devices/system/cpu/online", "0-7");
	for (cpu = 0; cpu < 8; cpu++)
		fake_cpu(cpu, l3size, cpu < 4 ? "0-3" : "4-7");
	fake_node(0, "0-3");
	fake_node(1, "4-7");
}

static int
fake_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return (remove(path));
}

static void
fake_setup(void)
{
	const char	*tmp = getenv("TMPDIR");

	if (tmp == NULL || *tmp == '\0' || strlen(tmp) > 128)
		tmp = "/tmp";
	snprintf(fake_root, sizeof(fake_root), "%s/test-plan.XXXXXX", tmp);
	cr_assert_not_null(mkdtemp(fake_root), "mkdtemp: %s", strerror(errno));
}

static void
fake_teardown(void)
{
	if (fake_root[0] != '\0')
		nftw(fake_root, fake_rm, 16, FTW_DEPTH | FTW_PHYS);
	fake_root[0] = '\0';
}

/* --- topo_read_llc, topo_init ------------------------------------------- */

Test(topo, read_llc_fake, .init = fake_setup, .fini = fake_teardown)
{
	uint64_t	size = 0;
	int		sharing = 0;

	fake_two_nodes("32768K");
	cr_assert_eq(topo_read_llc(fake_root, 0, &size, &sharing), 0);
	cr_expect_eq(size, 32 * MiB, "size %llu", (unsigned long long)size);
	cr_expect_eq(sharing, 4);
	cr_assert_eq(topo_read_llc(fake_root, 6, &size, &sharing), 0);
	cr_expect_eq(size, 32 * MiB);
	cr_expect_eq(sharing, 4);
	/* A CPU with no cache directory. */
	cr_expect_eq(topo_read_llc(fake_root, 9, &size, &sharing), -1);
}

Test(topo, init_fake, .init = fake_setup, .fini = fake_teardown)
{
	static struct topo	t;
	int			cpu;

	fake_two_nodes("32768K");
	cr_assert_eq(topo_init(&t, fake_root), 0);
	cr_expect_eq(t.ncpus, 8);
	cr_expect_eq(t.nnodes, 2);
	for (cpu = 0; cpu < 8; cpu++) {
		cr_expect_eq(t.cpu_online[cpu], 1, "cpu %d", cpu);
		cr_expect_eq(t.cpu_node[cpu], cpu < 4 ? 0 : 1, "cpu %d", cpu);
	}
	cr_expect_eq(t.cpu_online[8], 0);
	cr_expect_eq(t.llc_size, 32 * MiB, "llc %llu",
	    (unsigned long long)t.llc_size);
	cr_expect_eq(t.llc_sharing, 4);
	cr_expect_eq(t.llc_share, 8 * MiB);
	cr_expect_eq(plan_extent_max(t.llc_share), 8 * MiB);
}

Test(topo, init_no_cache, .init = fake_setup, .fini = fake_teardown)
{
	static struct topo	t;
	uint64_t		size = 7;
	int			sharing = 7;

	fake_put("sys/devices/system/cpu/online", "0-7");
	fake_node(0, "0-3");
	fake_node(1, "4-7");
	cr_expect_eq(topo_read_llc(fake_root, 0, &size, &sharing), -1);
	cr_expect_eq(size, 7);
	cr_expect_eq(sharing, 7);
	cr_assert_eq(topo_init(&t, fake_root), 0);
	cr_expect_eq(t.ncpus, 8);
	cr_expect_eq(t.nnodes, 2);
	cr_expect_eq(t.llc_size, 8 * MiB);
	cr_expect_eq(t.llc_sharing, 1);
	cr_expect_eq(t.llc_share, 8 * MiB);
}

Test(topo, init_no_online, .init = fake_setup, .fini = fake_teardown)
{
	static struct topo	t;

	cr_expect_eq(topo_init(&t, fake_root), -1);
	fake_put("sys/devices/system/cpu/online", "junk");
	cr_expect_eq(topo_init(&t, fake_root), -1);
}

Test(topo, size_suffix_m, .init = fake_setup, .fini = fake_teardown)
{
	static struct topo	t;
	uint64_t		size = 0;
	int			sharing = 0;

	fake_two_nodes("32M");
	cr_assert_eq(topo_read_llc(fake_root, 0, &size, &sharing), 0);
	cr_expect_eq(size, 32 * MiB);
	cr_assert_eq(topo_init(&t, fake_root), 0);
	cr_expect_eq(t.llc_size, 32 * MiB);
	cr_expect_eq(t.llc_share, 8 * MiB);
}

Test(topo, bad_l3_size_falls_to_l2, .init = fake_setup,
    .fini = fake_teardown)
{
	uint64_t	size = 0;
	int		sharing = 0;

	fake_two_nodes("lots");
	cr_assert_eq(topo_read_llc(fake_root, 0, &size, &sharing), 0);
	cr_expect_eq(size, 2 * MiB, "size %llu", (unsigned long long)size);
	cr_expect_eq(sharing, 1);
}

Test(topo, offline_holes, .init = fake_setup, .fini = fake_teardown)
{
	static struct topo	t;

	fake_put("sys/devices/system/cpu/online", "2-3,6-7");
	fake_cpu(2, "16384K", "2-3");
	fake_cpu(3, "16384K", "2-3");
	fake_cpu(6, "16384K", "6-7");
	fake_cpu(7, "16384K", "6-7");
	fake_node(0, "2-3");
	fake_node(1, "6-7");
	cr_assert_eq(topo_init(&t, fake_root), 0);
	cr_expect_eq(t.ncpus, 8);
	cr_expect_eq(t.nnodes, 2);
	cr_expect(!t.cpu_online[0] && !t.cpu_online[1] && t.cpu_online[2] &&
	    t.cpu_online[3] && !t.cpu_online[4] && !t.cpu_online[5] &&
	    t.cpu_online[6] && t.cpu_online[7]);
	cr_expect_eq(t.cpu_node[2], 0);
	cr_expect_eq(t.cpu_node[7], 1);
	/* The LLC comes from the first online CPU, cpu2. */
	cr_expect_eq(t.llc_size, 16 * MiB);
	cr_expect_eq(t.llc_sharing, 2);
	cr_expect_eq(t.llc_share, 8 * MiB);
}

Test(topo, offline_holes_0_1_4_5, .init = fake_setup,
    .fini = fake_teardown)
{
	static struct topo	t;

	fake_put("sys/devices/system/cpu/online", "0-1,4-5");
	fake_cpu(0, "32768K", "0-1");
	fake_cpu(1, "32768K", "0-1");
	fake_cpu(4, "32768K", "4-5");
	fake_cpu(5, "32768K", "4-5");
	fake_node(0, "0-1");
	fake_node(1, "4-5");
	cr_assert_eq(topo_init(&t, fake_root), 0);
	cr_expect_eq(t.ncpus, 6);
	cr_expect_eq(t.nnodes, 2);
	cr_expect_eq(t.cpu_online[2], 0);
	cr_expect_eq(t.cpu_online[4], 1);
	cr_expect_eq(t.cpu_node[5], 1);
	cr_expect_eq(t.llc_sharing, 2);
	cr_expect_eq(t.llc_share, 16 * MiB);
}
