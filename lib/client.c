/*
 * client.c - libhpz's calls: hpz_register (the userfaultfd handshake in
 * the caller, the page-state memfd, the fds passed to hpzerod) in named
 * steps, hpz_unregister, hpz_reset, hpz_set_policy, hpz_status,
 * hpz_list_regions, hpz_page_size.  The connection is conn.c's, the
 * records of our regions registry.c's; while hpzerod is away guard.c
 * serves.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <linux/userfaultfd.h>

#include "libhpz.h"
#include "hpz-protocol.h"
#include "hpz-state.h"
#include "mappers.h"

/* What we ask of UFFDIO_API, as far as the kernel offers it. */
#define LIB_UFFD_WANT	(UFFD_FEATURE_MISSING_HUGETLBFS | \
	UFFD_FEATURE_MINOR_HUGETLBFS | UFFD_FEATURE_MINOR_SHMEM | \
	UFFD_FEATURE_EXACT_ADDRESS | UFFD_FEATURE_THREAD_ID | \
	UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_UNMAP | \
	UFFD_FEATURE_EVENT_REMAP | UFFD_FEATURE_EVENT_FORK)

/*
 * A new page-state memfd for npages pages, all zero (every page "keep"
 * until the daemon says otherwise), sealed so that it can never shrink
 * under anyone's mapping.
 */
static int
lib_state_create(uint64_t npages)
{
	int	fd, error;

	fd = memfd_create("hpz-state", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd == -1)
		return (lib_fail(-errno, "memfd_create: %s", strerror(errno)));
	if (ftruncate(fd, (off_t)HPZ_STATE_SIZE(npages)) == -1 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
	    F_SEAL_SEAL) == -1) {
		error = -errno;
		close(fd);
		return (lib_fail(error, "page-state memfd: %s",
		    strerror(-error)));
	}
	return (fd);
}

long
hpz_page_size(int fd)
{
	struct statfs	sfs;

	if (fstatfs(fd, &sfs) == -1)
		return (lib_fail(-errno, "fstatfs: %s", strerror(errno)));
	if ((long)sfs.f_type == HUGETLBFS_MAGIC)
		return ((long)sfs.f_bsize);
	if ((long)sfs.f_type == TMPFS_MAGIC)
		return (sysconf(_SC_PAGESIZE));
	return (lib_fail(-EINVAL, "fd %d is on a filesystem with magic 0x%lx: "
	    "only hugetlbfs and shmem files can be served", fd,
	    (unsigned long)sfs.f_type));
}

/* A new userfaultfd: the syscall, else /dev/userfaultfd. */
static int
lib_uffd_open(void)
{
	int	fd, dev, error;

	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0)
		return (fd);
	error = -errno;
	dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	if (dev >= 0) {
		fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
		close(dev);
		if (fd >= 0)
			return (fd);
	}
	return (lib_fail(error, "cannot create a userfaultfd: %s (as "
	    "non-root, set vm.unprivileged_userfaultfd or grant access to "
	    "/dev/userfaultfd)", strerror(-error)));
}

/* Features the kernel offers, asked once on a throwaway uffd. */
static int
lib_uffd_features(uint64_t *features)
{
	static uint64_t		cached;
	static int		known;
	struct uffdio_api	api;
	int			fd;

	if (known) {
		*features = cached;
		return (0);
	}
	if ((fd = lib_uffd_open()) < 0)
		return (fd);
	memset(&api, 0, sizeof(api));
	api.api = UFFD_API;
	if (ioctl(fd, UFFDIO_API, &api) == -1 || api.api != UFFD_API) {
		close(fd);
		return (lib_fail(-ENOTSUP, "UFFDIO_API: %s", strerror(errno)));
	}
	close(fd);
	cached = api.features;
	known = 1;
	*features = cached;
	return (0);
}

/*
 * A request about a range we do not know (lib_lock held): it may be a
 * region the daemon has seen move and we have not yet (its mremap returns
 * once the event is read, perhaps before the header says so).  Ask the
 * daemon, which waits for its reader and knows; its reply names the
 * region, whose header is up to date by then.  Only while connected:
 * otherwise our guard serves and its addresses are the truth.
 */
static int
lib_ask_moved(void *req, size_t len, struct hpz_msg *reply,
    struct lib_region **out)
{
	int	error;

	*out = NULL;
	if (lib_regions == NULL || lib_guard_mode() != LIB_CONNECTED)
		return (-ENXIO);
	if ((error = lib_request(req, len, NULL, 0, reply,
	    HPZ_MSG_REPLY)) != 0)
		return (error);
	if ((*out = lib_find_id(reply->u.reply.region_id)) != NULL)
		lib_follow(*out);
	return (0);
}

/*
 * Does any page of [addr, addr+len) have a page-table entry here (the
 * present bit of /proc/self/pagemap, at the first 4 KiB of each page)?
 * When we cannot tell, say yes.
 */
static int
lib_any_mapped(uintptr_t addr, size_t len, long page)
{
	uint64_t	ent;
	uintptr_t	a;
	int		fd, mapped = 0;

	if ((fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC)) == -1)
		return (1);
	for (a = addr; a < addr + len && !mapped; a += (uintptr_t)page) {
		if (pread(fd, &ent, sizeof(ent), (off_t)(a / LIB_BASE_PAGE *
		    sizeof(ent))) != (ssize_t)sizeof(ent))
			mapped = 1;
		else if (ent & (1ULL << 63))
			mapped = 1;
	}
	close(fd);
	return (mapped);
}

static int
lib_check_region(const struct hpz_region *region)
{
	if (region == NULL)
		return (lib_fail(-EINVAL, "region is NULL"));
	if (region->addr == NULL || region->len == 0)
		return (lib_fail(-EINVAL, "region has no address or length"));
	if (region->fd < 0)
		return (lib_fail(-EINVAL, "region has no backing file: "
		    "private anonymous memory cannot be served; map a "
		    "hugetlbfs or shmem file MAP_SHARED (hpz_region_create)"));
	if ((region->flags & ~HPZ_REGION_FLAGS) != 0)
		return (lib_fail(-EINVAL, "unknown region flags 0x%x",
		    region->flags));
	if (region->offset < 0)
		return (lib_fail(-EINVAL, "negative file offset"));
	return (0);
}

int
hpz_register(const struct hpz_region *region)
{
	struct hpz_msg_register	 req;
	struct hpz_msg		 reply;
	struct uffdio_api	 api;
	struct uffdio_register	 ureg;
	struct uffdio_range	 range;
	struct lib_region	*lr = NULL;
	uint64_t		 offered = 0, need;
	void			*smap = NULL;
	long			 page;
	int			 uffd = -1, sfd = -1, bfd = -1, fds[3], error;
	int			 rezap;
	pid_t			 other;

	lib_init();
	if ((error = lib_check_region(region)) != 0)
		return (error);
	if ((page = hpz_page_size(region->fd)) < 0)
		return ((int)page);
	if (((uintptr_t)region->addr | region->len |
	    (uint64_t)region->offset) % (uint64_t)page != 0)
		return (lib_fail(-EINVAL, "address, length and offset must be "
		    "multiples of the backing page size %ld", page));
	/* Garbage is guarded here only (mappers.c, hpz_register(3)). */
	if ((region->flags & HPZ_DISCARD) && (other = mappers_other(region->fd,
	    (uint64_t)region->offset, region->len)) > 0)
		return (lib_fail(-EBUSY, "pid %d maps this range of the file "
		    "too, where its garbage (HPZ_DISCARD) would be readable: "
		    "unmap it there first, or register without HPZ_DISCARD",
		    (int)other));

	pthread_mutex_lock(&lib_lock);
	if (lib_overlaps((uintptr_t)region->addr, region->len)) {
		error = lib_fail(-EBUSY, "overlaps a region this process "
		    "registered");
		goto out;
	}
	if ((error = lib_uffd_features(&offered)) != 0)
		goto out;
	need = (uint64_t)page > LIB_BASE_PAGE ? UFFD_FEATURE_MINOR_HUGETLBFS :
	    UFFD_FEATURE_MINOR_SHMEM;
	if ((offered & need) == 0) {
		error = lib_fail(-ENOTSUP, "the kernel offers no userfaultfd "
		    "minor faults for %s", (uint64_t)page > LIB_BASE_PAGE ?
		    "hugetlbfs" : "shmem");
		goto out;
	}
	if ((uffd = lib_uffd_open()) < 0) {
		error = uffd;
		goto out;
	}
	memset(&api, 0, sizeof(api));
	api.api = UFFD_API;
	api.features = offered & LIB_UFFD_WANT;
	/* On failure the kernel zeroes api: test what we asked for. */
	if (ioctl(uffd, UFFDIO_API, &api) == -1 && errno == EPERM &&
	    (offered & LIB_UFFD_WANT & UFFD_FEATURE_EVENT_FORK)) {
		/*
		 * Fork events need CAP_SYS_PTRACE.  Without them a child
		 * that kept the range (no MADV_DONTFORK) is not served: it is
		 * not registered at all and sees the file as it is.
		 */
		memset(&api, 0, sizeof(api));
		api.api = UFFD_API;
		api.features = offered & LIB_UFFD_WANT &
		    ~(uint64_t)UFFD_FEATURE_EVENT_FORK;
		if (ioctl(uffd, UFFDIO_API, &api) == -1)
			api.api = 0;
	} else if (api.api != UFFD_API)
		api.api = 0;
	if (api.api != UFFD_API) {
		error = lib_fail(-ENOTSUP, "UFFDIO_API: %s", strerror(errno));
		goto out;
	}

	/*
	 * Garbage may still be mapped here from before: drop our page tables,
	 * now, while no uffd event can make the zap wait for a reader.
	 */
	if ((region->flags & HPZ_DISCARD) &&
	    madvise(region->addr, region->len, MADV_DONTNEED) == -1) {
		error = lib_fail(-errno, "madvise(MADV_DONTNEED): %s",
		    strerror(errno));
		goto out;
	}
	memset(&ureg, 0, sizeof(ureg));
	ureg.range.start = (uintptr_t)region->addr;
	ureg.range.len = region->len;
	ureg.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_MINOR;
	if (ioctl(uffd, UFFDIO_REGISTER, &ureg) == -1) {
		error = -errno;
		lib_fail(error, "UFFDIO_REGISTER: %s%s", strerror(errno),
		    errno == EINVAL ? " (is the range one MAP_SHARED mapping "
		    "of a hugetlbfs or shmem file?)" : "");
		goto out;
	}
	if ((ureg.ioctls & (1ULL << _UFFDIO_CONTINUE)) == 0) {
		error = lib_fail(-ENOTSUP, "UFFDIO_CONTINUE is not offered "
		    "on this range");
		goto unregister;
	}
	/*
	 * A thread that touched the range between the zap and the register
	 * mapped garbage again: zap once more when the daemon reads events.
	 */
	rezap = (region->flags & HPZ_DISCARD) &&
	    lib_any_mapped((uintptr_t)region->addr, region->len, page);
	/* Children must not inherit pages the daemon serves for us. */
	if (madvise(region->addr, region->len, MADV_DONTFORK) == -1) {
		error = lib_fail(-errno, "madvise(MADV_DONTFORK): %s",
		    strerror(errno));
		goto unregister;
	}
	if ((lr = calloc(1, sizeof(*lr))) == NULL) {
		error = lib_fail(-ENOMEM, "out of memory");
		goto dofork;
	}
	if ((sfd = lib_state_create(region->len / (uint64_t)page)) < 0) {
		error = sfd;
		goto dofork;
	}
	/* Ours to read, and to write while the daemon is away (guard.c). */
	smap = mmap(NULL, HPZ_STATE_SIZE(region->len / (uint64_t)page),
	    PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
	if (smap == MAP_FAILED) {
		smap = NULL;
		error = lib_fail(-errno, "mmap of the page state: %s",
		    strerror(errno));
		goto dofork;
	}
	madvise(smap, HPZ_STATE_SIZE(region->len / (uint64_t)page),
	    MADV_DONTFORK);
	if ((bfd = fcntl(region->fd, F_DUPFD_CLOEXEC, 0)) == -1) {
		error = lib_fail(-errno, "dup: %s", strerror(errno));
		goto dofork;
	}
	proto_init(&req, HPZ_MSG_REGISTER, sizeof(req), 0);
	req.addr = (uintptr_t)region->addr;
	req.len = region->len;
	req.offset = (uint64_t)region->offset;
	req.page_size = (uint64_t)page;
	req.uffd_features = api.features;
	req.uffd_ioctls = ureg.ioctls;
	req.flags = region->flags;
	fds[0] = uffd;
	fds[1] = region->fd;
	fds[2] = sfd;
	error = lib_request(&req, sizeof(req), fds, 3, &reply, HPZ_MSG_REPLY);
	if (error != 0)
		goto dofork;

	lr->addr = (uintptr_t)region->addr;
	lr->len = region->len;
	lr->offset = (uint64_t)region->offset;
	lr->page_size = (uint64_t)page;
	lr->npages = region->len / (uint64_t)page;
	lr->features = api.features;
	lr->ioctls = ureg.ioctls;
	lr->flags = region->flags;
	lr->uffd = uffd;
	lr->sfd = sfd;
	lr->fd = bfd;
	lr->smap = smap;
	lr->state = (_Atomic uint8_t *)((char *)smap + HPZ_STATE_PAGES_OFF);
	lr->lockfd = -1;
	lr->id = reply.u.reply.region_id;
	pthread_mutex_lock(&lib_rlock);
	lr->next = lib_regions;
	lib_regions = lr;
	pthread_mutex_unlock(&lib_rlock);
	/* From now on someone must notice when the daemon goes away. */
	lib_guard_start();
	pthread_mutex_unlock(&lib_lock);

	/*
	 * Only now: with uffd remove events on, the zap waits until someone
	 * reads the event, the daemon (or guard.c), which must know the
	 * region.  Pages the daemon mapped meanwhile fault once more.
	 */
	if (rezap && madvise(region->addr, region->len, MADV_DONTNEED) == -1) {
		error = -errno;
		(void)hpz_unregister(region);
		return (lib_fail(error, "madvise(MADV_DONTNEED): %s",
		    strerror(-error)));
	}
	return (0);

dofork:
	madvise(region->addr, region->len, MADV_DOFORK);
unregister:
	/* Wakes any thread that faulted meanwhile; the kernel serves it. */
	range.start = (uintptr_t)region->addr;
	range.len = region->len;
	ioctl(uffd, UFFDIO_UNREGISTER, &range);
out:
	free(lr);
	if (smap != NULL)
		munmap(smap, HPZ_STATE_SIZE(region->len / (uint64_t)page));
	if (uffd >= 0)
		close(uffd);
	if (sfd >= 0)
		close(sfd);
	if (bfd >= 0)
		close(bfd);
	pthread_mutex_unlock(&lib_lock);
	return (error);
}

/*
 * While the daemon is away, a request about a region waits (up to
 * HPZ_FALLBACK_MS and a second) for it to come back or for libhpz to serve
 * the region itself, then does it there; it never reports a success that
 * did not happen.
 */
int
hpz_unregister(const struct hpz_region *region)
{
	struct hpz_msg_range	 req;
	struct hpz_msg		 reply;
	struct uffdio_range	 range;
	struct lib_region	*lr;
	uint64_t		 deadline;
	int			 error;

	if (region == NULL)
		return (lib_fail(-EINVAL, "region is NULL"));
	pthread_mutex_lock(&lib_lock);
	lr = lib_lookup((uintptr_t)region->addr, region->len);
	if (lr == NULL) {
		proto_init(&req, HPZ_MSG_UNREGISTER, sizeof(req), 0);
		req.addr = (uintptr_t)region->addr;
		req.len = region->len;
		error = lib_ask_moved(&req, sizeof(req), &reply, &lr);
		if (error == 0 && (lr == NULL || lr->addr !=
		    (uintptr_t)region->addr))
			error = lib_fail(-EPROTO, "hpzerod unregistered a "
			    "region this process does not know there");
		if (error != 0) {
			pthread_mutex_unlock(&lib_lock);
			return (error != -ENXIO ? error : lib_fail(-ENXIO,
			    "this process has no region registered at exactly "
			    "that address and length"));
		}
		goto unregistered;
	}
	deadline = lib_guard_deadline();
	for (;;) {
		if (lr->gone) {
			/* Unmapped while we served it; its garbage is gone. */
			lib_guard_unlink(lr);
			lib_region_free(lr);
			pthread_mutex_unlock(&lib_lock);
			return (0);
		}
		if (lib_guard_serving(lr)) {
			/* We serve it: drop garbage and let go ourselves. */
			error = lib_guard_abandon(lr);
			pthread_mutex_unlock(&lib_lock);
			return (error);
		}
		proto_init(&req, HPZ_MSG_UNREGISTER, sizeof(req), 0);
		req.addr = lr->addr;
		req.len = lr->len;
		/*
		 * The daemon drops garbage and unregisters the range itself;
		 * if it cannot be reached the region stays registered: never
		 * exposed.
		 */
		error = lib_request(&req, sizeof(req), NULL, 0, &reply,
		    HPZ_MSG_REPLY);
		if (error == 0 || !lib_request_retry(deadline))
			break;
	}
unregistered:
	if (error == 0) {
		range.start = lr->addr;
		range.len = lr->len;
		ioctl(lr->uffd, UFFDIO_UNREGISTER, &range);
		madvise((void *)lr->addr, lr->len, MADV_DOFORK);
		lib_guard_unlink(lr);
		lib_region_free(lr);
	}
	pthread_mutex_unlock(&lib_lock);
	return (error);
}

int
hpz_reset(const struct hpz_region *region)
{
	struct hpz_msg_range	 req;
	struct hpz_msg		 reply;
	struct lib_region	*lr;
	uint64_t		 deadline;
	int			 error;

	if (region == NULL || region->addr == NULL || region->len == 0)
		return (lib_fail(-EINVAL, "region has no address or length"));
	pthread_mutex_lock(&lib_lock);
	lr = lib_lookup_within((uintptr_t)region->addr, region->len);
	if (lr == NULL) {
		proto_init(&req, HPZ_MSG_RESET, sizeof(req), 0);
		req.addr = (uintptr_t)region->addr;
		req.len = region->len;
		if ((error = lib_ask_moved(&req, sizeof(req), &reply,
		    &lr)) == 0)
			goto zap;
		pthread_mutex_unlock(&lib_lock);
		return (error != -ENXIO ? error : lib_fail(-ENXIO, "range is "
		    "not inside a region this process registered"));
	}
	deadline = lib_guard_deadline();
	for (;;) {
		if (lib_guard_serving(lr)) {
			/* Garbage in the shared state, then zapped: ours. */
			error = lib_guard_reset(lr, (uintptr_t)region->addr,
			    region->len);
			pthread_mutex_unlock(&lib_lock);
			return (error);
		}
		proto_init(&req, HPZ_MSG_RESET, sizeof(req), 0);
		req.addr = (uintptr_t)region->addr;
		req.len = region->len;
		error = lib_request(&req, sizeof(req), NULL, 0, &reply,
		    HPZ_MSG_REPLY);
		if (error == 0 || !lib_request_retry(deadline))
			break;
	}
zap:
	/*
	 * Only now zap our page tables: every later access faults and the
	 * daemon, which already counts the pages as garbage, clears them.
	 */
	if (error == 0 && madvise(region->addr, region->len,
	    MADV_DONTNEED) == -1)
		error = lib_fail(-errno, "madvise(MADV_DONTNEED): %s",
		    strerror(errno));
	/*
	 * Background clearing (and premapping) may start now that nothing of
	 * ours maps the range.  Its failure costs speed, not correctness.
	 */
	if (error == 0) {
		proto_init(&req, HPZ_MSG_SCRUB, sizeof(req), 0);
		req.addr = (uintptr_t)region->addr;
		req.len = region->len;
		(void)lib_request(&req, sizeof(req), NULL, 0, &reply,
		    HPZ_MSG_REPLY);
	}
	pthread_mutex_unlock(&lib_lock);
	return (error);
}

int
hpz_status(struct hpz_status *st)
{
	struct hpz_msg_header		 req;
	struct hpz_msg			 reply;
	const struct hpz_msg_status_reply *s = &reply.u.status;
	int				 error, i;

	if (st == NULL)
		return (lib_fail(-EINVAL, "status is NULL"));
	lib_init();
	proto_init(&req, HPZ_MSG_STATUS, sizeof(req), 0);
	pthread_mutex_lock(&lib_lock);
	error = lib_request(&req, sizeof(req), NULL, 0, &reply,
	    HPZ_MSG_STATUS_REPLY);
	pthread_mutex_unlock(&lib_lock);
	if (error != 0)
		return (error);
	memset(st, 0, sizeof(*st));
	snprintf(st->version, sizeof(st->version), "%s", s->version);
#define LIB_STATUS_COPY(name, kind, unit, prom, label, help) \
	st->name = s->name;
	HPZ_COUNTERS_ALL(LIB_STATUS_COPY, LIB_STATUS_COPY)
#undef LIB_STATUS_COPY
	snprintf(st->clear_kernel, sizeof(st->clear_kernel), "%s",
	    s->clear_kernel);
	snprintf(st->hot_kernel, sizeof(st->hot_kernel), "%s", s->hot_kernel);
	snprintf(st->context_stuck_what, sizeof(st->context_stuck_what), "%s",
	    s->context_stuck_what);
	st->clear_gbs = (double)s->clear_mbps / 1000.0;
	for (i = 0; i < HPZ_LATENCY_BUCKETS; i++)
		st->latency_hist[i] = s->latency_hist[i];
	st->bg_budget_gbs = (double)s->bg_budget_mbps / 1000.0;
	st->bg_client_budget_gbs = (double)s->bg_client_budget_mbps / 1000.0;
	st->cost_rt_huge = s->cost_rt_huge != 0;
	snprintf(st->policy_intercept, sizeof(st->policy_intercept), "%s",
	    (s->policy & HPZ_POLICY_INTERCEPT_ALWAYS) ? "always" : "auto");
	snprintf(st->policy_step_aside, sizeof(st->policy_step_aside), "%s",
	    (s->policy & HPZ_POLICY_ASIDE_NEVER) ? "never" :
	    (s->policy & HPZ_POLICY_ASIDE_ALWAYS) ? "always" : "auto");
	return (0);
}

int
hpz_set_policy(const struct hpz_region *region, unsigned int flags,
    int priority)
{
	struct hpz_msg_policy	 req;
	struct hpz_msg		 reply;
	struct lib_region	*lr;
	int			 error;

	if (region == NULL)
		return (lib_fail(-EINVAL, "region is NULL"));
	if ((flags & ~HPZ_REGION_FLAGS) != 0)
		return (lib_fail(-EINVAL, "unknown region flags 0x%x", flags));
	if (priority < HPZ_PRIO_MIN || priority > HPZ_PRIO_MAX)
		return (lib_fail(-EINVAL, "priority %d is not %d to %d",
		    priority, HPZ_PRIO_MIN, HPZ_PRIO_MAX));
	pthread_mutex_lock(&lib_lock);
	proto_init(&req, HPZ_MSG_POLICY, sizeof(req), 0);
	req.addr = (uintptr_t)region->addr;
	req.len = region->len;
	req.flags = flags;
	req.priority = priority;
	if (lib_lookup((uintptr_t)region->addr, region->len) == NULL) {
		/* Perhaps moved, and the daemon knows it already. */
		error = lib_ask_moved(&req, sizeof(req), &reply, &lr);
		pthread_mutex_unlock(&lib_lock);
		return (error != -ENXIO ? error : lib_fail(-ENXIO, "this "
		    "process has no region registered at exactly that "
		    "address and length"));
	}
	error = lib_request(&req, sizeof(req), NULL, 0, &reply, HPZ_MSG_REPLY);
	pthread_mutex_unlock(&lib_lock);
	return (error);
}

int
hpz_list_regions(struct hpz_region_info *info, size_t max, size_t *count)
{
	struct hpz_msg_regions			 req;
	struct hpz_msg				 reply;
	const struct hpz_msg_regions_reply	*rr = &reply.u.regions_reply;
	const struct hpz_msg_region_info	*e;
	uint64_t				 after = 0;
	size_t					 n = 0;
	uint32_t				 i;
	int					 error;

	if (count == NULL || (info == NULL && max != 0))
		return (lib_fail(-EINVAL, "count is NULL"));
	lib_init();
	pthread_mutex_lock(&lib_lock);
	do {
		proto_init(&req, HPZ_MSG_REGIONS, sizeof(req), 0);
		req.after_id = after;
		error = lib_request(&req, sizeof(req), NULL, 0, &reply,
		    HPZ_MSG_REGIONS_REPLY);
		if (error != 0)
			break;
		for (i = 0; i < rr->count; i++) {
			e = &rr->r[i];
			after = e->id;
			if (n < max) {
				info[n].id = e->id;
				info[n].pid = e->pid;
				info[n].uid = e->uid;
				info[n].flags = e->flags;
				info[n].addr = e->addr;
				info[n].len = e->len;
				info[n].page_size = e->page_size;
				info[n].faults = e->faults;
				info[n].pages_cleared = e->pages_cleared;
				info[n].pages_populated = e->pages_populated;
				info[n].fault_ns_total = e->fault_ns_total;
				info[n].fault_ns_max = e->fault_ns_max;
				info[n].priority = e->priority;
				info[n].bg_pages_cleared = e->bg_pages_cleared;
				info[n].bg_pages_pending = e->bg_pages_pending;
			}
			n++;
		}
	} while (rr->more);
	pthread_mutex_unlock(&lib_lock);
	/* All there are; the first max of them were filled in. */
	*count = n;
	return (error);
}
