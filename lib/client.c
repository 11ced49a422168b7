/*
 * client.c - libhpz's calls: hpz_register (the userfaultfd handshake in
 * the caller, the page-state memfd, the fds passed to hpzerod) in named
 * steps, hpz_unregister, hpz_reset, hpz_set_policy, hpz_status,
 * hpz_list_regions, hpz_page_size, hpz_strerror.  The connection is
 * conn.c's, the records of our regions registry.c's; while hpzerod is
 * away the guard (guard.c) reconnects and serve.c serves.
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

static pthread_once_t	 lib_once = PTHREAD_ONCE_INIT;

/*
 * A forked child must share neither the parent's connection (conn.c),
 * its guard (guard.c) nor its regions (registry.c), in that order: the
 * guard lets go of what it holds of each region before its record goes.
 */
static void
lib_atfork_child(void)
{
	lib_conn_fork_child();
	lib_guard_fork_child();
	lib_registry_fork_child();
}

/* Once a process, before its first request: the guard watches the link. */
static void
lib_init_once(void)
{
	lib_conn_watch(lib_guard_connected, lib_guard_disconnected);
	pthread_atfork(NULL, NULL, lib_atfork_child);
}

static void
lib_init(void)
{
	pthread_once(&lib_once, lib_init_once);
}

/*
 * A request (lib_lock held).  If the connection was lost while we have
 * regions, they are registered again first (guard.c): a new daemon must
 * never see a request about a region it does not know.
 */
static int
lib_request(void *req, size_t len, const int *fds, int nfds,
    struct hpz_msg *reply, uint16_t want)
{
	int	error;

	if ((error = lib_guard_ready()) != 0)
		return (error);
	return (lib_call(req, len, fds, nfds, reply, want));
}

/* Wait a little for the daemon or the fallback; 0 if the deadline passed. */
static int
lib_request_retry(uint64_t deadline)
{
	/* Refused by a daemon that is there: no waiting for another. */
	if (lib_conn_refused())
		return (0);
	if (lib_guard_mode() == LIB_CONNECTED)
		return (0);
	return (lib_guard_wait(deadline));
}

/* What we ask of UFFDIO_API, as far as the kernel offers it. */
#define LIB_UFFD_WANT	(UFFD_FEATURE_MISSING_HUGETLBFS | \
	UFFD_FEATURE_MINOR_HUGETLBFS | UFFD_FEATURE_MINOR_SHMEM | \
	UFFD_FEATURE_EXACT_ADDRESS | UFFD_FEATURE_THREAD_ID | \
	UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_UNMAP | \
	UFFD_FEATURE_EVENT_REMAP | UFFD_FEATURE_EVENT_FORK)

/* The words for the errors libhpz returns; strerror's for any other. */
const char *
hpz_strerror(int err)
{
	const char	*s;

	if (err > 0)
		err = -err;
	switch (err) {
	case 0:
		return ("success");
	case -ECONNREFUSED:
	case -ENOENT:
		return ("hpzerod is not running (nothing listens on the "
		    "socket)");
	case -ECONNRESET:
	case -EPIPE:
		return ("the connection to hpzerod was lost");
	case -EBUSY:
		return ("the region overlaps a registered region");
	case -ENXIO:
		return ("no such registered region");
	case -EDQUOT:
		return ("over a limit of hpzerod");
	case -EINVAL:
		return ("invalid region or request");
	case -ENOTSUP:
		return ("the kernel lacks the userfaultfd features needed");
	case -ETIMEDOUT:
		return ("hpzerod did not answer in time");
	case -EPROTO:
		return ("hpzerod answered out of protocol");
	}
	s = strerrordesc_np(-err);
	return (s != NULL ? s : "unknown error");
}

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

/* A message of type about [addr, addr+len): unregister, reset, scrub. */
static void
lib_range_msg(struct hpz_msg_range *req, uint16_t type, uintptr_t addr,
    size_t len)
{
	proto_init(req, type, sizeof(*req), 0);
	req->addr = addr;
	req->len = len;
}

/* Such a message sent (lib_lock held), answered by a plain reply. */
static int
lib_range_request(uint16_t type, uintptr_t addr, size_t len,
    struct hpz_msg *reply)
{
	struct hpz_msg_range	req;

	lib_range_msg(&req, type, addr, len);
	return (lib_request(&req, sizeof(req), NULL, 0, reply,
	    HPZ_MSG_REPLY));
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

/*
 * hpz_register as it goes, step by step.  The record is made first and
 * takes each thing as a step gets it, so that nothing can fail once the
 * daemon said yes; lib_register_undo gives back what a failed step left.
 */
struct lib_registering {
	const struct hpz_region	*region;
	long			 page;
	struct lib_region	*lr;
	int			 registered;	/* the range is on lr->uffd */
	int			 dontfork;	/* MADV_DONTFORK is set on it */
	int			 rezap;		/* garbage may be mapped again */
};

/* The arguments, before anything is taken: the page size, the alignment. */
static int
lib_register_check(struct lib_registering *rg)
{
	const struct hpz_region	*region = rg->region;
	pid_t			 other;
	int			 error;

	if ((error = lib_check_region(region)) != 0)
		return (error);
	if ((rg->page = hpz_page_size(region->fd)) < 0)
		return ((int)rg->page);
	if (((uintptr_t)region->addr | region->len |
	    (uint64_t)region->offset) % (uint64_t)rg->page != 0)
		return (lib_fail(-EINVAL, "address, length and offset must be "
		    "multiples of the backing page size %ld", rg->page));
	/* Garbage is guarded here only (mappers.c, hpz_register(3)). */
	if ((region->flags & HPZ_DISCARD) && (other = mappers_other(region->fd,
	    (uint64_t)region->offset, region->len)) > 0)
		return (lib_fail(-EBUSY, "pid %d maps this range of the file "
		    "too, where its garbage (HPZ_DISCARD) would be readable: "
		    "unmap it there first, or register without HPZ_DISCARD",
		    (int)other));
	return (0);
}

/* The record of the region, holding nothing yet. */
static int
lib_register_record(struct lib_registering *rg)
{
	const struct hpz_region	*region = rg->region;
	struct lib_region	*lr;

	if ((lr = rg->lr = calloc(1, sizeof(*lr))) == NULL)
		return (lib_fail(-ENOMEM, "out of memory"));
	lr->addr = (uintptr_t)region->addr;
	lr->len = region->len;
	lr->offset = (uint64_t)region->offset;
	lr->page_size = (uint64_t)rg->page;
	lr->npages = region->len / (uint64_t)rg->page;
	lr->flags = region->flags;
	lr->uffd = lr->sfd = lr->fd = lr->lockfd = -1;
	return (0);
}

/*
 * A userfaultfd with the features the kernel offers of those we want
 * (lib_lock held); none at all if the range overlaps a region of ours or
 * the kernel has no minor faults for its kind of file.
 */
static int
lib_register_uffd(struct lib_registering *rg)
{
	struct lib_region	*lr = rg->lr;
	struct uffdio_api	 api;
	uint64_t		 offered = 0, need;
	int			 error;

	if (lib_overlaps(lr->addr, lr->len))
		return (lib_fail(-EBUSY, "overlaps a region this process "
		    "registered"));
	if ((error = lib_uffd_features(&offered)) != 0)
		return (error);
	need = lr->page_size > LIB_BASE_PAGE ? UFFD_FEATURE_MINOR_HUGETLBFS :
	    UFFD_FEATURE_MINOR_SHMEM;
	if ((offered & need) == 0)
		return (lib_fail(-ENOTSUP, "the kernel offers no userfaultfd "
		    "minor faults for %s", lr->page_size > LIB_BASE_PAGE ?
		    "hugetlbfs" : "shmem"));
	if ((lr->uffd = lib_uffd_open()) < 0)
		return (lr->uffd);
	memset(&api, 0, sizeof(api));
	api.api = UFFD_API;
	api.features = offered & LIB_UFFD_WANT;
	/* On failure the kernel zeroes api: test what we asked for. */
	if (ioctl(lr->uffd, UFFDIO_API, &api) == -1 && errno == EPERM &&
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
		if (ioctl(lr->uffd, UFFDIO_API, &api) == -1)
			api.api = 0;
	} else if (api.api != UFFD_API)
		api.api = 0;
	if (api.api != UFFD_API)
		return (lib_fail(-ENOTSUP, "UFFDIO_API: %s", strerror(errno)));
	lr->features = api.features;
	return (0);
}

/*
 * The range on the uffd, for missing and minor faults, with no garbage
 * of before left mapped (HPZ_DISCARD), kept out of children.
 */
static int
lib_register_range(struct lib_registering *rg)
{
	const struct hpz_region	*region = rg->region;
	struct uffdio_register	 ureg;
	int			 error;

	/*
	 * Garbage may still be mapped here from before: drop our page tables,
	 * now, while no uffd event can make the zap wait for a reader.
	 */
	if ((region->flags & HPZ_DISCARD) &&
	    madvise(region->addr, region->len, MADV_DONTNEED) == -1)
		return (lib_fail(-errno, "madvise(MADV_DONTNEED): %s",
		    strerror(errno)));
	memset(&ureg, 0, sizeof(ureg));
	ureg.range.start = (uintptr_t)region->addr;
	ureg.range.len = region->len;
	ureg.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_MINOR;
	if (ioctl(rg->lr->uffd, UFFDIO_REGISTER, &ureg) == -1) {
		error = -errno;
		return (lib_fail(error, "UFFDIO_REGISTER: %s%s",
		    strerror(errno), errno == EINVAL ? " (is the range one "
		    "MAP_SHARED mapping of a hugetlbfs or shmem file?)" : ""));
	}
	rg->registered = 1;
	rg->lr->ioctls = ureg.ioctls;
	if ((ureg.ioctls & (1ULL << _UFFDIO_CONTINUE)) == 0)
		return (lib_fail(-ENOTSUP, "UFFDIO_CONTINUE is not offered "
		    "on this range"));
	/*
	 * A thread that touched the range between the zap and the register
	 * mapped garbage again: zap once more when the daemon reads events.
	 */
	rg->rezap = (region->flags & HPZ_DISCARD) &&
	    lib_any_mapped((uintptr_t)region->addr, region->len, rg->page);
	/* Children must not inherit pages the daemon serves for us. */
	if (madvise(region->addr, region->len, MADV_DONTFORK) == -1)
		return (lib_fail(-errno, "madvise(MADV_DONTFORK): %s",
		    strerror(errno)));
	rg->dontfork = 1;
	return (0);
}

/* The page-state memfd, mapped, and our copy of the backing file. */
static int
lib_register_state(struct lib_registering *rg)
{
	struct lib_region	*lr = rg->lr;

	if ((lr->sfd = lib_state_create(lr->npages)) < 0)
		return (lr->sfd);
	/* Ours to read, and to write while the daemon is away (serve.c). */
	lr->smap = mmap(NULL, HPZ_STATE_SIZE(lr->npages),
	    PROT_READ | PROT_WRITE, MAP_SHARED, lr->sfd, 0);
	if (lr->smap == MAP_FAILED) {
		lr->smap = NULL;
		return (lib_fail(-errno, "mmap of the page state: %s",
		    strerror(errno)));
	}
	madvise(lr->smap, HPZ_STATE_SIZE(lr->npages), MADV_DONTFORK);
	lr->state = (_Atomic uint8_t *)((char *)lr->smap +
	    HPZ_STATE_PAGES_OFF);
	if ((lr->fd = fcntl(rg->region->fd, F_DUPFD_CLOEXEC, 0)) == -1)
		return (lib_fail(-errno, "dup: %s", strerror(errno)));
	return (0);
}

/* The register request, with the uffd, the backing file and the state. */
static int
lib_register_send(struct lib_registering *rg)
{
	const struct hpz_region	*region = rg->region;
	struct lib_region	*lr = rg->lr;
	struct hpz_msg_register	 req;
	struct hpz_msg		 reply;
	int			 fds[3], error;

	proto_init(&req, HPZ_MSG_REGISTER, sizeof(req), 0);
	req.addr = (uintptr_t)region->addr;
	req.len = region->len;
	req.offset = (uint64_t)region->offset;
	req.page_size = (uint64_t)rg->page;
	req.uffd_features = lr->features;
	req.uffd_ioctls = lr->ioctls;
	req.flags = region->flags;
	fds[0] = lr->uffd;
	fds[1] = region->fd;
	fds[2] = lr->sfd;
	error = lib_request(&req, sizeof(req), fds, 3, &reply, HPZ_MSG_REPLY);
	if (error == 0)
		lr->id = reply.u.reply.region_id;
	return (error);
}

/* A step failed: give back what the steps before it took, last first. */
static void
lib_register_undo(struct lib_registering *rg)
{
	const struct hpz_region	*region = rg->region;
	struct uffdio_range	 range;

	if (rg->dontfork)
		madvise(region->addr, region->len, MADV_DOFORK);
	if (rg->registered) {
		/* Wakes any thread that faulted meanwhile; the kernel serves. */
		range.start = (uintptr_t)region->addr;
		range.len = region->len;
		ioctl(rg->lr->uffd, UFFDIO_UNREGISTER, &range);
	}
	lib_region_free(rg->lr);
}

int
hpz_register(const struct hpz_region *region)
{
	struct lib_registering	rg;
	int			error;

	lib_init();
	memset(&rg, 0, sizeof(rg));
	rg.region = region;
	if ((error = lib_register_check(&rg)) != 0 ||
	    (error = lib_register_record(&rg)) != 0)
		return (error);
	pthread_mutex_lock(&lib_lock);
	if ((error = lib_register_uffd(&rg)) != 0 ||
	    (error = lib_register_range(&rg)) != 0 ||
	    (error = lib_register_state(&rg)) != 0 ||
	    (error = lib_register_send(&rg)) != 0) {
		lib_register_undo(&rg);
		pthread_mutex_unlock(&lib_lock);
		return (error);
	}
	/* The daemon has it: ours from now on, on lib_regions. */
	pthread_mutex_lock(&lib_rlock);
	rg.lr->next = lib_regions;
	lib_regions = rg.lr;
	pthread_mutex_unlock(&lib_rlock);
	/* From now on someone must notice when the daemon goes away. */
	lib_guard_start();
	pthread_mutex_unlock(&lib_lock);

	/*
	 * Only now: with uffd remove events on, the zap waits until someone
	 * reads the event, the daemon (or serve.c), which must know the
	 * region.  Pages the daemon mapped meanwhile fault once more.
	 */
	if (rg.rezap && madvise(region->addr, region->len,
	    MADV_DONTNEED) == -1) {
		error = -errno;
		(void)hpz_unregister(region);
		return (lib_fail(error, "madvise(MADV_DONTNEED): %s",
		    strerror(-error)));
	}
	return (0);
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
		lib_range_msg(&req, HPZ_MSG_UNREGISTER, (uintptr_t)region->addr,
		    region->len);
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
		/*
		 * The daemon drops garbage and unregisters the range itself;
		 * if it cannot be reached the region stays registered: never
		 * exposed.
		 */
		error = lib_range_request(HPZ_MSG_UNREGISTER, lr->addr,
		    lr->len, &reply);
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
		lib_range_msg(&req, HPZ_MSG_RESET, (uintptr_t)region->addr,
		    region->len);
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
		error = lib_range_request(HPZ_MSG_RESET,
		    (uintptr_t)region->addr, region->len, &reply);
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
		(void)lib_range_request(HPZ_MSG_SCRUB,
		    (uintptr_t)region->addr, region->len, &reply);
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
	if ((lr = lib_lookup((uintptr_t)region->addr, region->len)) != NULL)
		/* As the daemon keeps them; our own let-go reads them too. */
		lr->flags = (lr->flags & HPZ_DISCARD) | (flags & ~HPZ_DISCARD);
	else {
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
