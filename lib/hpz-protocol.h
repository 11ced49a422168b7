/*
 * hpz-protocol.h - the wire protocol between libhpz and hpzerod.
 *
 * SOCK_SEQPACKET over a UNIX socket: one message a packet, host byte order
 * (both ends are on the same machine).  Every request gets exactly one
 * reply carrying the request's seq.  File descriptors travel only with
 * HPZ_MSG_REGISTER (exactly three: the userfaultfd, the backing file, then
 * the page-state memfd of hpz-state.h) and HPZ_MSG_POOL_FILE (exactly one,
 * the pool file handed to the client).
 *
 * Don't forget to bump HPZ_PROTOCOL_VERSION when anything here, or in the
 * list of the status reply's numbers (hpz-counters.h), changes.
 */
#ifndef HPZ_PROTOCOL_H
#define HPZ_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "hpz.h"

#define HPZ_PROTOCOL_VERSION	9
#define HPZ_MAGIC		0x315a5048u	/* "HPZ1" */

/* No valid message is larger; receivers read one byte more to see excess. */
#define HPZ_MSG_MAX		4096
#define HPZ_REPLY_TEXT		192
#define HPZ_REGISTER_NFDS	3

enum hpz_msg_type {
	HPZ_MSG_REGISTER = 1,		/* client: struct hpz_msg_register + 3 fds */
	HPZ_MSG_UNREGISTER = 2,		/* client: struct hpz_msg_range */
	HPZ_MSG_RESET = 3,		/* client: struct hpz_msg_range */
	HPZ_MSG_STATUS = 4,		/* client: header only */
	HPZ_MSG_REGIONS = 5,		/* client: struct hpz_msg_regions */
	HPZ_MSG_POLICY = 6,		/* client: struct hpz_msg_policy */
	HPZ_MSG_SCRUB = 7,		/* client: struct hpz_msg_range; after
					   a reset's zap: background may start */
	HPZ_MSG_POOL_TAKE = 8,		/* client: struct hpz_msg_pool_take */
	HPZ_MSG_POOL_STATUS = 9,	/* client: struct hpz_msg_pool_status */
	HPZ_MSG_RESERVE = 10,		/* client: struct hpz_msg_reserve */
	HPZ_MSG_REPLY = 64,		/* daemon: struct hpz_msg_reply */
	HPZ_MSG_STATUS_REPLY = 65,	/* daemon: struct hpz_msg_status_reply */
	HPZ_MSG_REGIONS_REPLY = 66,	/* daemon: struct hpz_msg_regions_reply */
	HPZ_MSG_POOL_FILE = 67,		/* daemon: struct hpz_msg_pool_file +
					   the file */
	HPZ_MSG_POOL_STATUS_REPLY = 68,	/* daemon: struct
					   hpz_msg_pool_status_reply */
};

struct hpz_msg_header {
	uint32_t	magic;		/* HPZ_MAGIC */
	uint16_t	version;	/* HPZ_PROTOCOL_VERSION */
	uint16_t	type;		/* enum hpz_msg_type */
	uint32_t	len;		/* whole message, header included */
	uint32_t	seq;		/* chosen by the client, echoed in the reply */
};

struct hpz_msg_register {
	struct hpz_msg_header hdr;
	uint64_t	addr;		/* client virtual address */
	uint64_t	len;		/* bytes */
	uint64_t	offset;		/* file offset mapped at addr */
	uint64_t	page_size;	/* backing page size the client saw */
	uint64_t	uffd_features;	/* features UFFDIO_API agreed to */
	uint64_t	uffd_ioctls;	/* ioctls UFFDIO_REGISTER returned */
	uint32_t	flags;		/* HPZ_REGION_FLAGS */
	uint32_t	reserved;	/* must be zero */
};

struct hpz_msg_range {
	struct hpz_msg_header hdr;
	uint64_t	addr;
	uint64_t	len;
};

struct hpz_msg_reply {
	struct hpz_msg_header hdr;
	int32_t		error;		/* 0 or a negative errno */
	uint32_t	reserved;	/* must be zero */
	uint64_t	region_id;	/* on a successful register */
	char		text[HPZ_REPLY_TEXT];	/* NUL-terminated reason */
};

/* A number of the status reply (hpz-counters.h) on the wire. */
#define HPZ_MSG_STATUS_FIELD(name, kind, unit, prom, label, help) \
	uint64_t	name;

struct hpz_msg_status_reply {
	struct hpz_msg_header hdr;
	char		version[32];	/* NUL-terminated */
	HPZ_COUNTERS_DAEMON(HPZ_MSG_STATUS_FIELD, HPZ_MSG_STATUS_FIELD)
	HPZ_COUNTERS_FAULTS(HPZ_MSG_STATUS_FIELD, HPZ_MSG_STATUS_FIELD)
	/* Clearing engine. */
	char		clear_kernel[16];	/* NUL-terminated */
	char		hot_kernel[16];		/* NUL-terminated */
	uint64_t	clear_mbps;		/* bulk kernel, measured at start */
	HPZ_COUNTERS_ENGINE(HPZ_MSG_STATUS_FIELD, HPZ_MSG_STATUS_FIELD)
	uint64_t	latency_hist[HPZ_LATENCY_BUCKETS];
	/* Background work. */
	HPZ_COUNTERS_BG(HPZ_MSG_STATUS_FIELD, HPZ_MSG_STATUS_FIELD)
	uint64_t	bg_budget_mbps;		/* 0: unlimited */
	uint64_t	bg_client_budget_mbps;
	/* Limits in force (0: none), and what the asking uid holds. */
	HPZ_COUNTERS_LIMITS(HPZ_MSG_STATUS_FIELD, HPZ_MSG_STATUS_FIELD)
	HPZ_COUNTERS_COST_RT(HPZ_MSG_STATUS_FIELD, HPZ_MSG_STATUS_FIELD)
	HPZ_COUNTERS_COST(HPZ_MSG_STATUS_FIELD, HPZ_MSG_STATUS_FIELD)
	uint32_t	cost_rt_huge;		/* round trip on 2 MiB pages */
	uint32_t	policy;			/* HPZ_POLICY_* bits */
	/* Faults intercepted only while a region holds garbage. */
	HPZ_COUNTERS_INTERCEPT(HPZ_MSG_STATUS_FIELD, HPZ_MSG_STATUS_FIELD)
	/* What the background leaves to the faults. */
	HPZ_COUNTERS_SPARE(HPZ_MSG_STATUS_FIELD, HPZ_MSG_STATUS_FIELD)
	/* Client contexts; what the longest stuck one waits in. */
	HPZ_COUNTERS_CCTX(HPZ_MSG_STATUS_FIELD, HPZ_MSG_STATUS_FIELD)
	char		context_stuck_what[64];	/* NUL-terminated */
	HPZ_COUNTERS_COST_LIVE(HPZ_MSG_STATUS_FIELD, HPZ_MSG_STATUS_FIELD)
	/* What all clients share, and its bounds. */
	HPZ_COUNTERS_SHARED(HPZ_MSG_STATUS_FIELD, HPZ_MSG_STATUS_FIELD)
	HPZ_COUNTERS_LIMITS_MORE(HPZ_MSG_STATUS_FIELD, HPZ_MSG_STATUS_FIELD)
};
/* hpz_msg_status_reply.policy: [policy] in hpzerod.conf. */
#define HPZ_POLICY_INTERCEPT_ALWAYS	0x01	/* else auto */
#define HPZ_POLICY_ASIDE_NEVER		0x02	/* neither: auto */
#define HPZ_POLICY_ASIDE_ALWAYS		0x04

/* Change a region's policy (flags and background priority). */
struct hpz_msg_policy {
	struct hpz_msg_header hdr;
	uint64_t	addr;		/* exactly as registered */
	uint64_t	len;
	uint32_t	flags;		/* HPZ_REGION_FLAGS */
	int32_t		priority;	/* HPZ_PRIO_MIN .. HPZ_PRIO_MAX */
};

/* Ask for the regions (the caller's uid's, or all for root) after an id. */
struct hpz_msg_regions {
	struct hpz_msg_header hdr;
	uint64_t	after_id;
};

#define HPZ_REGIONS_PER_REPLY	16
struct hpz_msg_region_info {
	uint64_t	id;
	int32_t		pid;
	uint32_t	uid;
	uint32_t	flags;
	uint32_t	reserved;
	uint64_t	addr;
	uint64_t	len;
	uint64_t	page_size;
	uint64_t	faults;
	uint64_t	pages_cleared;
	uint64_t	pages_populated;
	uint64_t	fault_ns_total;
	uint64_t	fault_ns_max;
	int32_t		priority;
	uint32_t	reserved2;
	uint64_t	bg_pages_cleared;
	uint64_t	bg_pages_pending;
};

struct hpz_msg_regions_reply {
	struct hpz_msg_header hdr;
	uint32_t	count;		/* entries used */
	uint32_t	more;		/* 1: ask again after the last id */
	struct hpz_msg_region_info r[HPZ_REGIONS_PER_REPLY];
};

/*
 * Ask for a file of the pre-zeroed pool (daemon/pool.c): huge pages of
 * page_size the daemon allocated ahead, on one of the nodes in nodes.  The
 * answer is a struct hpz_msg_pool_file with the file, or a struct
 * hpz_msg_reply saying why not (the client then makes its own memfd).
 */
#define HPZ_POOL_NAME		64
#define HPZ_POOL_NODES		64	/* nodes a request can name */
struct hpz_msg_pool_take {
	struct hpz_msg_header hdr;
	uint64_t	len;		/* bytes the client will use; 0: unknown */
	uint64_t	page_size;	/* a huge page size */
	uint64_t	nodes;		/* bit n: node n will do; 0: any node */
	int32_t		node;		/* the first choice, or -1 */
	uint32_t	reserved;	/* must be zero */
	char		name[HPZ_POOL_NAME];	/* the name the program asked
						   for, NUL-terminated; for
						   the log */
};

/* The pool file: size bytes, every page allocated and zero.  One fd. */
struct hpz_msg_pool_file {
	struct hpz_msg_header hdr;
	uint64_t	size;		/* the file's size, whole pages */
	uint64_t	page_size;
	int32_t		node;		/* where its pages are, -1: unknown */
	uint32_t	reserved;	/* must be zero */
	uint64_t	id;		/* hand-out number, for the logs */
};

/* Ask for the pools (a page size on a node each) from index first on. */
struct hpz_msg_pool_status {
	struct hpz_msg_header hdr;
	uint32_t	first;
	uint32_t	reserved;	/* must be zero */
};

#define HPZ_POOLS_PER_REPLY	24
struct hpz_msg_pool_info {
	uint64_t	page_size;
	int32_t		node;
	uint32_t	enabled;	/* 0 or 1 */
	uint64_t	target_pages;	/* the size set for it */
	uint64_t	ready_pages;	/* allocated, zero, waiting */
	uint64_t	reserve_pages;	/* kept free for other programs */
	uint64_t	host_avail_pages; /* free and unreserved, last seen */
	uint64_t	filled_pages;	/* allocated since the start */
	uint64_t	fill_ns;	/* time spent allocating them */
	uint64_t	yielded_pages;	/* given back to the host */
	uint64_t	handouts;	/* files handed out */
	uint64_t	handout_pages;	/* pages in them */
	uint64_t	misses;		/* asked for, none ready */
	uint64_t	refused;	/* over a uid's limit */
	uint64_t	hold_pages;	/* kept free for the host (reserve) */
	uint64_t	hold_ms;	/* left of that hold; 0: none */
	uint32_t	hold_uid;	/* who asked for it last */
	uint32_t	reserved;	/* zero */
};

/*
 * Make len bytes of page_size pages free for the host (a program that does
 * not use hpzerod, such as a plain guest): the pools of that page size give
 * pages back until the host's free, unreserved count covers len, and
 * allocate none over them until others have taken as many or hold_ms has
 * passed (0: the daemon's default; it caps both).  The answer is a struct
 * hpz_msg_reply: 0 once the host has them free, or why not (-ENOMEM: not
 * even with every pool page given back).
 */
struct hpz_msg_reserve {
	struct hpz_msg_header hdr;
	uint64_t	len;		/* bytes, a multiple of page_size */
	uint64_t	page_size;	/* a huge page size */
	uint32_t	hold_ms;	/* 0: the daemon's default */
	uint32_t	reserved;	/* must be zero */
};

struct hpz_msg_pool_status_reply {
	struct hpz_msg_header hdr;
	uint32_t	count;		/* entries used */
	uint32_t	more;		/* 1: ask again from first + count */
	struct hpz_msg_pool_info p[HPZ_POOLS_PER_REPLY];
};

_Static_assert(sizeof(struct hpz_msg_pool_status_reply) <= HPZ_MSG_MAX,
    "pool status");
_Static_assert(sizeof(struct hpz_msg_regions_reply) <= HPZ_MSG_MAX, "regions");
_Static_assert(sizeof(struct hpz_msg_register) <= HPZ_MSG_MAX, "register");
_Static_assert(sizeof(struct hpz_msg_reply) <= HPZ_MSG_MAX, "reply");
_Static_assert(sizeof(struct hpz_msg_status_reply) <= HPZ_MSG_MAX, "status");

/* A received message: the bytes and the fds that came with them. */
struct hpz_msg {
	union {
		struct hpz_msg_header		hdr;
		struct hpz_msg_register		reg;
		struct hpz_msg_range		range;
		struct hpz_msg_reply		reply;
		struct hpz_msg_status_reply	status;
		struct hpz_msg_regions		regions;
		struct hpz_msg_policy		policy;
		struct hpz_msg_regions_reply	regions_reply;
		struct hpz_msg_pool_take	pool_take;
		struct hpz_msg_pool_file	pool_file;
		struct hpz_msg_pool_status	pool_status;
		struct hpz_msg_pool_status_reply pool_status_reply;
		struct hpz_msg_reserve		reserve;
		unsigned char			bytes[HPZ_MSG_MAX + 1];
	} u;
	size_t		len;
	int		fds[HPZ_REGISTER_NFDS];
	int		nfds;
	int		fds_lost;	/* the receiver could not take them all */
};

/* proto.c */
void		 proto_init(void *msg, uint16_t type, size_t len, uint32_t seq);
size_t		 proto_size(uint16_t type);
int		 proto_validate(const struct hpz_msg *msg, char *why,
		    size_t whylen);
ssize_t		 proto_send(int sock, const void *msg, size_t len,
		    const int *fds, int nfds);
ssize_t		 proto_recv(int sock, struct hpz_msg *msg);
void		 proto_close_fds(struct hpz_msg *msg);
void		 proto_set_closer(void (*closer)(int fd));
const char	*proto_type_name(uint16_t type);
int		 proto_page_size_ok(uint64_t page_size);

#endif /* HPZ_PROTOCOL_H */
