/*
 * hpz.h - libhpz, the client side of hpzerod.
 *
 * The only installed header.  struct hpz_region may grow: new fields are
 * only ever appended after `flags`, and a caller that zero-initialises the
 * struct (struct hpz_region r = { 0 }) gets the old behaviour from them.
 */
#ifndef HPZ_H
#define HPZ_H

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HPZ_VERSION		"0.1.0"

/* Default socket; $HPZ_SOCKET overrides it. */
#define HPZ_SOCKET_DEFAULT	"/run/hpzerod/hpzerod.sock"

/* hpz_region.flags: region flags. */
#define HPZ_DISCARD		0x0001u	/* current contents are garbage */
#define HPZ_AHEAD_ONFAULT	0x0010u	/* after a fault, allocate the next
					   pages, adapting to the pattern */
#define HPZ_AHEAD_EAGER		0x0020u	/* allocate the whole region in the
					   background */
#define HPZ_PREMAP		0x0040u	/* map pages once they are ready,
					   before they are touched */
#define HPZ_NO_SCRUB		0x0080u	/* garbage is cleared on fault only */
#define HPZ_NO_PREMAP		0x0002u	/* leave pages cleared or allocated
					   ahead unmapped until touched
					   (premapping them is the default;
					   HPZ_PREMAP, which asked for it, is
					   now the default) */
#define HPZ_REGION_FLAGS	(HPZ_DISCARD | HPZ_AHEAD_ONFAULT | \
	HPZ_AHEAD_EAGER | HPZ_PREMAP | HPZ_NO_SCRUB | HPZ_NO_PREMAP)

/* hpz_set_policy() priorities of a region's background work. */
#define HPZ_PRIO_MIN		0
#define HPZ_PRIO_DEFAULT	4
#define HPZ_PRIO_MAX		7

/* hpz_region_create() flags: page size, a separate namespace. */
#define HPZ_PAGE_2M		0x0000u	/* 2 MiB hugetlb memfd (default) */
#define HPZ_PAGE_1G		0x0100u	/* 1 GiB hugetlb memfd */
#define HPZ_PAGE_SHMEM		0x0200u	/* shmem memfd, 4 KiB pages */
#define HPZ_PAGE_MASK		0x0300u
#define HPZ_NO_POOL		0x0400u	/* make the memfd here: never take
					   a file from hpzerod's pool */

struct hpz_region {
	void		*addr;		/* start of the caller's MAP_SHARED mapping */
	size_t		 len;		/* bytes, a multiple of the backing page size */
	int		 fd;		/* hugetlbfs or shmem file backing the mapping */
	off_t		 offset;	/* file offset mapped at addr */
	unsigned int	 flags;		/* HPZ_DISCARD: the current contents are garbage */
};

#define HPZ_LATENCY_BUCKETS	32	/* bucket i: [2^i, 2^(i+1)) ns */

/* Counters of a running daemon, as hpz_status() returns them. */
struct hpz_status {
	char		 version[32];
	unsigned long long uptime_ms;
	unsigned long long clients;
	unsigned long long regions;
	unsigned long long bytes_registered;
	unsigned long long workers;
	unsigned long long faults;		/* faults resolved */
	unsigned long long faults_missing;	/* page was not in the file */
	unsigned long long faults_minor;	/* page was in the file */
	unsigned long long faults_shared;	/* resolved by another fault's work */
	unsigned long long pages_cleared;
	unsigned long long bytes_cleared;
	unsigned long long pages_populated;
	unsigned long long pages_punched;
	unsigned long long resets;
	unsigned long long registers;
	unsigned long long unregisters;
	unsigned long long requests_rejected;
	unsigned long long clients_dropped;
	unsigned long long fault_ns_total;	/* sum of fault read -> mapped */
	unsigned long long fault_ns_max;
	/* The clearing engine. */
	char		 clear_kernel[16];	/* bulk kernel, e.g. "avx512-nt" */
	char		 hot_kernel[16];	/* kernel for the neighbourhood */
	double		 clear_gbs;		/* bulk kernel, measured at start */
	unsigned long long hot_size;		/* neighbourhood cleared last */
	unsigned long long extent_max;		/* largest single clear */
	unsigned long long bulk_bytes;		/* cleared by the bulk kernel */
	unsigned long long bulk_ns;
	unsigned long long hot_bytes;		/* cleared by the hot kernel */
	unsigned long long hot_ns;
	unsigned long long faults_coalesced;	/* resolved with a neighbour */
	unsigned long long jobs_split;		/* clears shared by workers */
	unsigned long long faults_polled;	/* read by a spinning worker */
	unsigned long long latency_hist[HPZ_LATENCY_BUCKETS];
	/* Background work. */
	unsigned long long bg_pages_cleared;	/* scrubbed ahead of faults */
	unsigned long long bg_bytes_cleared;
	unsigned long long bg_ns;		/* time spent clearing them */
	unsigned long long bg_pages_populated;	/* allocated ahead */
	unsigned long long bg_pages_premapped;	/* mapped before a touch */
	unsigned long long bg_pages_pending;	/* garbage not yet scrubbed */
	unsigned long long bg_throttle_ns;	/* waited on the budgets */
	double		 bg_budget_gbs;		/* 0: unlimited */
	double		 bg_client_budget_gbs;
	/* Limits in force (0: none; hpzerod.conf(5) [limits]). */
	unsigned long long limit_uid_clients;	/* connections a uid */
	unsigned long long limit_uid_regions;	/* regions a uid */
	unsigned long long limit_uid_bytes;	/* bytes registered a uid */
	unsigned long long limit_uid_state_bytes; /* page-state bytes a uid */
	unsigned long long limit_region_pages;	/* pages a region */
	unsigned long long limit_conn_regions;	/* regions a connection */
	/* What the caller's uid holds now, against those. */
	unsigned long long uid_clients;
	unsigned long long uid_regions;
	unsigned long long uid_bytes;
	unsigned long long uid_state_bytes;
	unsigned long long fds_closing;		/* passed fds being closed */
	/* What a fault costs here, measured at start (0: not measured). */
	unsigned long long cost_rt_ns;		/* uffd round trip, page cached */
	int		 cost_rt_huge;		/* ... measured on 2 MiB pages */
	unsigned long long cost_kzero_ns;	/* kernel zeroing a 2 MiB page */
	unsigned long long cost_ktouch_ns;	/* kernel first touch of one */
	unsigned long long cost_clear_ns;	/* hpzerod's clear of one */
	/* Faults intercepted only while a region holds garbage. */
	char		 policy_intercept[8];	/* "auto" or "always" */
	char		 policy_step_aside[8];	/* "auto", "never", "always" */
	unsigned long long regions_intercepting; /* trapping faults now */
	unsigned long long intercept_on;	/* switches to trapping them */
	unsigned long long intercept_off;	/* switches back to the kernel */
	unsigned long long steps_aside;		/* garbage left to the kernel */
	unsigned long long pages_aside;		/* pages so dropped */
};

/* One registered region, as hpz_list_regions() returns it. */
struct hpz_region_info {
	unsigned long long id;
	int		 pid;		/* 0: the client is in another pid ns */
	unsigned int	 uid;
	unsigned int	 flags;
	unsigned long long addr;	/* in the client */
	unsigned long long len;
	unsigned long long page_size;
	unsigned long long faults;
	unsigned long long pages_cleared;
	unsigned long long pages_populated;
	unsigned long long fault_ns_total;
	unsigned long long fault_ns_max;
	int		 priority;
	unsigned long long bg_pages_cleared;
	unsigned long long bg_pages_pending;
};

/* One pool of hpzerod (a page size on a node), as hpz_pool_status() says. */
struct hpz_pool_info {
	unsigned long long page_size;
	int		 node;
	int		 enabled;		/* [pool] enable */
	unsigned long long target_pages;	/* the size set for it */
	unsigned long long ready_pages;		/* allocated, zero, waiting */
	unsigned long long reserve_pages;	/* kept free for the others */
	unsigned long long host_avail_pages;	/* free, unreserved: last seen */
	unsigned long long filled_pages;	/* allocated since the start */
	unsigned long long fill_ns;		/* time spent allocating */
	unsigned long long yielded_pages;	/* given back to the host */
	unsigned long long handouts;		/* files handed out */
	unsigned long long handout_pages;	/* pages in them */
	unsigned long long misses;		/* asked for, none ready */
	unsigned long long refused;		/* over a uid's limit */
};

int		 hpz_register(const struct hpz_region *region);
int		 hpz_unregister(const struct hpz_region *region);
int		 hpz_reset(const struct hpz_region *region);
int		 hpz_region_create(struct hpz_region *region, size_t len,
		    unsigned int flags);
void		 hpz_region_destroy(struct hpz_region *region);
const char	*hpz_strerror(int err);

/*
 * Change a registered region's policy: flags (HPZ_AHEAD_*, HPZ_PREMAP,
 * HPZ_NO_SCRUB; HPZ_DISCARD is ignored) and the priority of its
 * background work (HPZ_PRIO_MIN .. HPZ_PRIO_MAX).
 */
int		 hpz_set_policy(const struct hpz_region *region,
		    unsigned int flags, int priority);

/* The daemon's (or the library's) reason for this thread's last failure. */
const char	*hpz_last_error(void);
/* Ask the daemon for its counters. */
int		 hpz_status(struct hpz_status *status);
/* The daemon's regions (the caller's uid's; all of them for root). */
int		 hpz_list_regions(struct hpz_region_info *info, size_t max,
		    size_t *count);
/*
 * A file of hpzerod's pool: a hugetlb memfd of the page size in flags
 * (HPZ_PAGE_2M or HPZ_PAGE_1G) whose pages are allocated and zero, for a
 * region of len bytes (0: not known yet).  Returns the fd (close-on-exec),
 * its size in *ready (whole pages; it may be less or more than len: the
 * caller ftruncates it), or a negative errno when none is ready.
 */
int		 hpz_pool_take(size_t len, unsigned int flags,
		    const char *name, size_t *ready);
/* The daemon's pools. */
int		 hpz_pool_status(struct hpz_pool_info *info, size_t max,
		    size_t *count);
/* Page size of the file behind fd (hugetlbfs or shmem), or negative errno. */
long		 hpz_page_size(int fd);

#ifdef __cplusplus
}
#endif

#endif /* HPZ_H */
