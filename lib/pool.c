/*
 * pool.c - the client side of hpzerod's pre-zeroed pool: ask for a file
 * (hpz_pool_take) and for the pool's levels (hpz_pool_status).  Each call
 * has a connection of its own, so that a daemon that does not know these
 * requests (or drops us) never costs the regions of the main connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include "libhpz.h"
#include "hpz-protocol.h"

#define POOL_REPLY_TIMEOUT_MS	5000
#define POOL_MASK_BITS		1024	/* nodes get_mempolicy may report */

/* The kernel's memory policy modes (linux/mempolicy.h), by value. */
#define POOL_MPOL_DEFAULT	0
#define POOL_MPOL_PREFERRED	1
#define POOL_MPOL_BIND		2
#define POOL_MPOL_INTERLEAVE	3
#define POOL_MPOL_LOCAL		4
#define POOL_MPOL_PREFERRED_MANY 5
#define POOL_MPOL_MODE_FLAGS	(0x7u << 13)	/* static, relative, ... */

/* One request on sock and its validated reply (fds kept in reply). */
static int
pool_call(int sock, void *req, size_t len, struct hpz_msg *reply,
    uint16_t want)
{
	struct hpz_msg_header	*hdr = req;
	int			 error;

	hdr->seq = 1;
	if ((error = lib_exchange(sock, req, len, NULL, 0, reply, want,
	    POOL_REPLY_TIMEOUT_MS)) != 0)
		return (error);
	if (reply->u.hdr.type == HPZ_MSG_REPLY)
		return (lib_fail(reply->u.reply.error != 0 ?
		    reply->u.reply.error : -EPROTO, "hpzerod: %s",
		    reply->u.reply.text));
	return (0);
}

/*
 * Which nodes the caller's memory policy lets its pages come from (*nodes,
 * 0: any) and which it wants first (*node, -1: no choice).  -1 when a pool
 * file, all of whose pages sit on one node, cannot follow the policy
 * (interleaving).
 */
static int
pool_policy(uint64_t *nodes, int *node)
{
	unsigned long	mask[POOL_MASK_BITS / (8 * sizeof(unsigned long))];
	unsigned int	cpu, nd, i;
	int		mode;

	*nodes = 0;
	*node = -1;
	if (syscall(SYS_getcpu, &cpu, &nd, NULL) == 0 && nd < HPZ_POOL_NODES)
		*node = (int)nd;
	memset(mask, 0, sizeof(mask));
	if (syscall(SYS_get_mempolicy, &mode, mask,
	    (unsigned long)POOL_MASK_BITS, NULL, 0UL) == -1)
		return (0);	/* no NUMA: any node is the one node */
	switch ((unsigned int)mode & ~POOL_MPOL_MODE_FLAGS) {
	case POOL_MPOL_DEFAULT:
	case POOL_MPOL_LOCAL:
		return (0);
	case POOL_MPOL_PREFERRED:
	case POOL_MPOL_PREFERRED_MANY:
		/* The kernel falls back to other nodes: so may we. */
		for (i = 0; i < HPZ_POOL_NODES; i++)
			if (mask[0] & (1UL << i)) {
				*node = (int)i;
				break;
			}
		return (0);
	case POOL_MPOL_BIND:
		*nodes = (uint64_t)mask[0];
		if (*nodes == 0)
			return (-1);	/* only nodes a request cannot name */
		if (*node < 0 || (*nodes & (1ULL << *node)) == 0)
			*node = __builtin_ctzll(*nodes);
		return (0);
	default:
		return (-1);
	}
}

int
hpz_pool_take(size_t len, unsigned int flags, const char *name,
    size_t *ready)
{
	struct hpz_msg_pool_take	 req;
	struct hpz_msg			 reply;
	struct statfs			 sfs;
	struct stat			 st;
	const char			*off = getenv("HPZ_NO_POOL");
	uint64_t			 page;
	int				 sock, fd, error, fl;

	if (ready == NULL)
		return (lib_fail(-EINVAL, "ready is NULL"));
	*ready = 0;
	if (off != NULL && *off != '\0' && strcmp(off, "0") != 0)
		return (lib_fail(-ENOENT, "HPZ_NO_POOL is set"));
	switch (flags) {
	case HPZ_PAGE_2M:
		page = 2ULL << 20;
		break;
	case HPZ_PAGE_1G:
		page = 1ULL << 30;
		break;
	default:
		return (lib_fail(-EINVAL, "flags 0x%x: the pool has "
		    "HPZ_PAGE_2M and HPZ_PAGE_1G files only", flags));
	}
	proto_init(&req, HPZ_MSG_POOL_TAKE, sizeof(req), 0);
	/* Whole pages on the wire: len rounded up to the page. */
	if (len > SIZE_MAX - page)
		return (lib_fail(-EINVAL, "length %zu: too large", len));
	req.len = (len + page - 1) / page * page;
	req.page_size = page;
	if (pool_policy(&req.nodes, &req.node) != 0)
		return (lib_fail(-ENOENT, "the memory policy interleaves (or "
		    "names nodes past %d): a pool file lies on one node",
		    HPZ_POOL_NODES - 1));
	snprintf(req.name, sizeof(req.name), "%s", name != NULL ? name : "");

	if ((sock = lib_dial()) < 0)
		return (sock);
	error = pool_call(sock, &req, sizeof(req), &reply, HPZ_MSG_POOL_FILE);
	close(sock);
	if (error != 0)
		return (error);
	fd = reply.fds[0];
	reply.fds[0] = -1;
	/* What the daemon says must be what the file is. */
	fl = fcntl(fd, F_GETFL);
	if (fstatfs(fd, &sfs) == -1 || fstat(fd, &st) == -1 || fl == -1 ||
	    (long)sfs.f_type != HUGETLBFS_MAGIC ||
	    (uint64_t)sfs.f_bsize != page || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size != reply.u.pool_file.size ||
	    (fl & O_ACCMODE) != O_RDWR) {
		close(fd);
		return (lib_fail(-EPROTO, "hpzerod's pool file is not a "
		    "read-write hugetlb file of %llu bytes in %llu-byte pages",
		    (unsigned long long)reply.u.pool_file.size,
		    (unsigned long long)page));
	}
	*ready = (size_t)reply.u.pool_file.size;
	return (fd);
}

int
hpz_pool_status(struct hpz_pool_info *info, size_t max, size_t *count)
{
	struct hpz_msg_pool_status		 req;
	struct hpz_msg				 reply;
	const struct hpz_msg_pool_status_reply	*r =
	    &reply.u.pool_status_reply;
	const struct hpz_msg_pool_info		*e;
	size_t					 n = 0;
	uint32_t				 i;
	int					 sock, error;

	if (count == NULL || (info == NULL && max != 0))
		return (lib_fail(-EINVAL, "count is NULL"));
	*count = 0;
	if ((sock = lib_dial()) < 0)
		return (sock);
	do {
		proto_init(&req, HPZ_MSG_POOL_STATUS, sizeof(req), 0);
		req.first = (uint32_t)n;
		error = pool_call(sock, &req, sizeof(req), &reply,
		    HPZ_MSG_POOL_STATUS_REPLY);
		if (error != 0)
			break;
		for (i = 0; i < r->count; i++, n++) {
			e = &r->p[i];
			if (n >= max)
				continue;
			info[n].page_size = e->page_size;
			info[n].node = e->node;
			info[n].enabled = e->enabled != 0;
			info[n].target_pages = e->target_pages;
			info[n].ready_pages = e->ready_pages;
			info[n].reserve_pages = e->reserve_pages;
			info[n].host_avail_pages = e->host_avail_pages;
			info[n].filled_pages = e->filled_pages;
			info[n].fill_ns = e->fill_ns;
			info[n].yielded_pages = e->yielded_pages;
			info[n].handouts = e->handouts;
			info[n].handout_pages = e->handout_pages;
			info[n].misses = e->misses;
			info[n].refused = e->refused;
		}
	} while (r->more && r->count > 0);
	close(sock);
	*count = n;
	return (error);
}
