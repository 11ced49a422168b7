/*
 * client.c - libhpz requests: the userfaultfd handshake in the caller,
 * fd passing to hpzerod, replies and errors.  What happens while hpzerod
 * is away (reconnecting, serving faults ourselves) is in guard.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <linux/userfaultfd.h>

#include "libhpz.h"
#include "hpz-protocol.h"
#include "hpz-state.h"
#include "mappers.h"

#define LIB_REPLY_TIMEOUT_MS	60000
/* How often a request waiting for the daemon (or the fallback) looks. */
#define LIB_WAIT_STEP_MS	100

/* What we ask of UFFDIO_API, as far as the kernel offers it. */
#define LIB_UFFD_WANT	(UFFD_FEATURE_MISSING_HUGETLBFS | \
	UFFD_FEATURE_MINOR_HUGETLBFS | UFFD_FEATURE_MINOR_SHMEM | \
	UFFD_FEATURE_EXACT_ADDRESS | UFFD_FEATURE_THREAD_ID | \
	UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_UNMAP | \
	UFFD_FEATURE_EVENT_REMAP | UFFD_FEATURE_EVENT_FORK)

/* The connection and its requests; before lib_rlock when both are held. */
pthread_mutex_t		 lib_lock = PTHREAD_MUTEX_INITIALIZER;
struct lib_region	*lib_regions;
static pthread_once_t	 lib_once = PTHREAD_ONCE_INIT;
static int		 lib_sock = -1;
static uint32_t		 lib_seq;		/* never 0: a refusal's */
static int		 lib_refused;		/* the last call's connection
						   was refused at accept */
static __thread char	 lib_error[HPZ_REPLY_TEXT + 64];

/* Record this thread's reason for a failure; returns error. */
int
lib_fail(int error, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(lib_error, sizeof(lib_error), fmt, ap);
	va_end(ap);
	return (error);
}

const char *
hpz_last_error(void)
{
	return (lib_error);
}

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

void
lib_region_free(struct lib_region *lr)
{
	if (lr->smap != NULL)
		munmap(lr->smap, HPZ_STATE_SIZE(lr->npages));
	if (lr->uffd >= 0)
		close(lr->uffd);
	if (lr->sfd >= 0)
		close(lr->sfd);
	if (lr->fd >= 0)
		close(lr->fd);
	free(lr);
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

/* A child must not share the parent's connection or its regions. */
static void
lib_atfork_child(void)
{
	struct lib_region	*lr, *next;

	pthread_mutex_init(&lib_lock, NULL);
	if (lib_sock != -1)
		close(lib_sock);
	lib_sock = -1;
	/* No guard thread here; its fds (and any server lock) must go. */
	lib_guard_fork_child();
	for (lr = lib_regions; lr != NULL; lr = next) {
		next = lr->next;
		/* MADV_DONTFORK kept the ranges (and our maps) out of it. */
		lr->smap = NULL;
		lib_region_free(lr);
	}
	lib_regions = NULL;
}

static void
lib_init_once(void)
{
	pthread_atfork(NULL, NULL, lib_atfork_child);
}

static const char *
lib_socket_path(void)
{
	const char	*p = getenv("HPZ_SOCKET");

	return (p != NULL && *p != '\0' ? p : HPZ_SOCKET_DEFAULT);
}

/* A new connection to hpzerod: its fd, or a negative errno (lib_fail). */
int
lib_dial(void)
{
	struct sockaddr_un	 sun;
	const char		*path = lib_socket_path();
	int			 fd, error;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path))
		return (lib_fail(-ENAMETOOLONG, "socket path too long: %s",
		    path));
	strcpy(sun.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return (lib_fail(-errno, "socket: %s", strerror(errno)));
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		error = -errno;
		close(fd);
		return (lib_fail(error, "cannot connect to hpzerod at %s: %s",
		    path, strerror(-error)));
	}
	return (fd);
}

/* Connect if we are not connected (lock held). */
int
lib_connect(void)
{
	int	fd;

	if (lib_sock != -1)
		return (0);
	if ((fd = lib_dial()) < 0)
		return (fd);
	lib_sock = fd;
	lib_guard_connected(fd);
	return (0);
}

/* Drop the connection (lock held); shutdown tells the guard's copy too. */
void
lib_disconnect(void)
{
	if (lib_sock != -1) {
		shutdown(lib_sock, SHUT_RDWR);
		close(lib_sock);
		lib_guard_disconnected();
	}
	lib_sock = -1;
}

/*
 * Send req (its seq set) on sock and wait up to timeout_ms for its reply,
 * validated: of type want, or a plain reply (the daemon's status).  0, or
 * a negative errno (lib_fail) when the connection is no good any more.
 */
int
lib_exchange(int sock, void *req, size_t len, const int *fds, int nfds,
    struct hpz_msg *reply, uint16_t want, int timeout_ms)
{
	struct hpz_msg_header	*hdr = req;
	struct pollfd		 pfd = { .fd = sock, .events = POLLIN };
	char			 why[128] = "";
	ssize_t			 n;
	int			 error;

	if (proto_send(sock, req, len, fds, nfds) != (ssize_t)len) {
		error = -errno;
		return (lib_fail(error, "cannot send to hpzerod: %s",
		    strerror(-error)));
	}
	for (;;) {
		n = poll(&pfd, 1, timeout_ms);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return (lib_fail(-ETIMEDOUT, "no reply from hpzerod"));
		n = proto_recv(sock, reply);
		if (n == -1 && (errno == EAGAIN || errno == EINTR))
			continue;
		break;
	}
	if (n <= 0) {
		error = n == 0 ? -ECONNRESET : -errno;
		return (lib_fail(error, "hpzerod closed the connection"));
	}
	/*
	 * Sequence 0, before any answer: the daemon refused the connection
	 * as it accepted it (a limit), and closes it.  Not a daemon that went
	 * away: the caller gets the reason, at once.
	 */
	if (proto_validate(reply, why, sizeof(why)) == 0 &&
	    reply->u.hdr.seq == 0 && reply->u.hdr.type == HPZ_MSG_REPLY &&
	    reply->u.reply.error < 0) {
		lib_refused = 1;
		return (lib_fail(reply->u.reply.error, "hpzerod refused the "
		    "connection: %.*s", (int)sizeof(reply->u.reply.text),
		    reply->u.reply.text));
	}
	if (proto_validate(reply, why, sizeof(why)) != 0 ||
	    reply->u.hdr.seq != hdr->seq ||
	    (reply->u.hdr.type != want && reply->u.hdr.type != HPZ_MSG_REPLY)) {
		proto_close_fds(reply);
		return (lib_fail(-EPROTO, "bad reply from hpzerod: %s",
		    why[0] != '\0' ? why : "unexpected type or sequence"));
	}
	return (0);
}

/*
 * Send a request and wait for its reply (lock held).  The reply is
 * validated; the daemon's status is returned with its text as the error.
 */
int
lib_call(void *req, size_t len, const int *fds, int nfds,
    struct hpz_msg *reply, uint16_t want)
{
	struct hpz_msg_header	*hdr = req;
	int			 error;

	if ((error = lib_connect()) != 0)
		return (error);
	if (++lib_seq == 0)
		lib_seq = 1;
	hdr->seq = lib_seq;
	if ((error = lib_exchange(lib_sock, req, len, fds, nfds, reply, want,
	    LIB_REPLY_TIMEOUT_MS)) != 0) {
		lib_disconnect();
		return (error);
	}
	if (reply->u.hdr.type == HPZ_MSG_REPLY && reply->u.reply.error != 0)
		return (lib_fail(reply->u.reply.error, "hpzerod: %s",
		    reply->u.reply.text));
	if (reply->u.hdr.type != want)
		return (lib_fail(-EPROTO, "hpzerod sent a %s, expected a %s",
		    proto_type_name(reply->u.hdr.type),
		    proto_type_name(want)));
	return (0);
}

/*
 * A request (lock held).  If the connection was lost while we have
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
	if (lib_refused) {
		lib_refused = 0;
		return (0);
	}
	if (lib_guard_mode() == LIB_CONNECTED)
		return (0);
	return (lib_guard_wait(deadline));
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
 * A region may have moved: an mremap of the whole range.  The daemon (or
 * our guard, while it serves) follows the move as it reads the uffd's
 * remap event and writes the new address into the state header; take it
 * from there (lib_lock held).  Taking lib_rlock also waits for a guard
 * that is handling such an event right now.
 */
void
lib_follow(struct lib_region *lr)
{
	const struct hpz_state_header	*h = lr->smap;
	uint64_t			 a, len;

	if (h == NULL || __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) !=
	    HPZ_STATE_MAGIC)
		return;
	a = __atomic_load_n(&h->addr, __ATOMIC_ACQUIRE);
	len = __atomic_load_n(&h->len, __ATOMIC_RELAXED);
	if (a == lr->addr || a == 0 || len != lr->len ||
	    a % lr->page_size != 0 || a + len < a)
		return;
	pthread_mutex_lock(&lib_rlock);
	lr->addr = (uintptr_t)a;
	pthread_mutex_unlock(&lib_rlock);
}

static void
lib_follow_all(void)
{
	struct lib_region	*lr;

	pthread_mutex_lock(&lib_rlock);
	pthread_mutex_unlock(&lib_rlock);
	for (lr = lib_regions; lr != NULL; lr = lr->next)
		lib_follow(lr);
}

/* The record of the daemon's region id (from its reply), or NULL. */
static struct lib_region *
lib_find_id(uint64_t id)
{
	struct lib_region	*lr;

	if (id == 0)
		return (NULL);
	for (lr = lib_regions; lr != NULL; lr = lr->next)
		if (lr->id == id)
			return (lr);
	return (NULL);
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

/* The registered-region record for exactly this range, or NULL. */
static struct lib_region *
lib_find(uintptr_t addr, size_t len, struct lib_region ***prevp)
{
	struct lib_region	**pp, *lr;

	for (pp = &lib_regions; (lr = *pp) != NULL; pp = &lr->next) {
		if (lr->addr == addr && lr->len == len) {
			if (prevp != NULL)
				*prevp = pp;
			return (lr);
		}
	}
	return (NULL);
}

/* The record whose range holds [addr, addr+len), or NULL. */
static struct lib_region *
lib_find_within(uintptr_t addr, size_t len)
{
	struct lib_region	*lr;

	for (lr = lib_regions; lr != NULL; lr = lr->next)
		if (addr >= lr->addr && len <= lr->len &&
		    addr - lr->addr <= lr->len - len)
			return (lr);
	return (NULL);
}

/*
 * lib_find and lib_find_within, following moves (lib_follow_all) only on
 * a miss: reading every header costs a cache miss each, for 1000 regions
 * as much as the request.
 */
static struct lib_region *
lib_lookup(uintptr_t addr, size_t len)
{
	struct lib_region	*lr;

	if ((lr = lib_find(addr, len, NULL)) == NULL) {
		lib_follow_all();
		lr = lib_find(addr, len, NULL);
	}
	return (lr);
}

static struct lib_region *
lib_lookup_within(uintptr_t addr, size_t len)
{
	struct lib_region	*lr;

	if ((lr = lib_find_within(addr, len)) == NULL) {
		lib_follow_all();
		lr = lib_find_within(addr, len);
	}
	return (lr);
}

/* Does [addr, addr+len) overlap a region we know (where it lies now)? */
static int
lib_overlaps(uintptr_t addr, size_t len)
{
	if (lib_find_within(addr, 1) == NULL &&
	    lib_find_within(addr + len - 1, 1) == NULL)
		return (0);
	lib_follow_all();
	return (lib_find_within(addr, 1) != NULL ||
	    lib_find_within(addr + len - 1, 1) != NULL);
}

int
lib_is_registered(const struct hpz_region *region)
{
	int	found;

	pthread_mutex_lock(&lib_lock);
	found = lib_lookup((uintptr_t)region->addr, region->len) != NULL;
	pthread_mutex_unlock(&lib_lock);
	return (found);
}

/* Drop our record of a region whose mapping is gone. */
void
lib_forget(const struct hpz_region *region)
{
	struct lib_region	*lr;

	pthread_mutex_lock(&lib_lock);
	lr = lib_lookup((uintptr_t)region->addr, region->len);
	if (lr != NULL) {
		lib_guard_unlink(lr);
		lib_region_free(lr);
	}
	pthread_mutex_unlock(&lib_lock);
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

	pthread_once(&lib_once, lib_init_once);
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
	pthread_once(&lib_once, lib_init_once);
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
	pthread_once(&lib_once, lib_init_once);
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
