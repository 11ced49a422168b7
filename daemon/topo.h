/*
 * topo.h - CPUs, nodes and the last-level cache (topo.c).
 */
#ifndef HPZD_TOPO_H
#define HPZD_TOPO_H

#include <stdint.h>
#include <sys/types.h>

#define TOPO_CPUS_MAX		1024
#define TOPO_NODES_MAX		64
struct topo {
	int		 ncpus;			/* CPU ids 0 .. ncpus-1 */
	int		 cpu_online[TOPO_CPUS_MAX];
	int		 cpu_node[TOPO_CPUS_MAX];
	int		 nnodes;		/* node ids 0 .. nnodes-1 */
	uint64_t	 llc_size;		/* bytes */
	int		 llc_sharing;		/* CPUs sharing one LLC */
	uint64_t	 llc_share;		/* llc_size / llc_sharing */
};
extern struct topo	 topo;
ssize_t		 topo_read_file(const char *path, char *buf, size_t len);
int		 topo_parse_list(const char *list, int *set, int max);
int		 topo_read_llc(const char *root, int cpu, uint64_t *size,
		    int *sharing);
int		 topo_init(struct topo *, const char *root);
int		 topo_online(void);

#endif /* HPZD_TOPO_H */
