/*
 * preload.c - libhpz-preload.so, the LD_PRELOAD half of hpz-run: a program's
 * large writable MAP_SHARED mappings of hugetlbfs or shmem files are
 * registered with hpzerod as they are made, and unregistered before they
 * are unmapped, moved or mapped over.  A hugetlb memfd the program makes
 * and sizes (memfd_create, then ftruncate: QEMU's memory-backend-memfd)
 * becomes a file of hpzerod's pre-zeroed pool.  Everything else passes
 * untouched, and a failure only ever costs the program hpzerod's help,
 * never a different result or errno.
 *
 * A range has one userfaultfd.  When the program registers a uffd of its
 * own on one of ours (QEMU's postcopy and background snapshot, and their
 * probes), ours is handed over first: hpz_unregister, which drops the
 * garbage from the file, then the program's ioctl; when the program lets
 * go of the range (UFFDIO_UNREGISTER, or close of that uffd) we register
 * it again, without HPZ_DISCARD.  Before the program passes the file of a
 * region that may still hold garbage to another process (SCM_RIGHTS), the
 * garbage is dropped the same way: only our uffd guards it.
 */
#if defined(_FILE_OFFSET_BITS) && _FILE_OFFSET_BITS == 64
#undef _FILE_OFFSET_BITS	/* we define both mmap and mmap64 */
#endif

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <linux/falloc.h>
#include <linux/magic.h>
#include <linux/memfd.h>
#include <linux/userfaultfd.h>

#include "hpz.h"
#include "mappers.h"
#include "runflags.h"
#include "runselect.h"
#include "size.h"
#include "uffd-compat.h"

#define PRELOAD_MIN_DEFAULT	(64UL << 20)
#define PRELOAD_SLOTS		256	/* registered mappings at once */

/* A slot of the mapping table. */
#define PRELOAD_FREE		0
#define PRELOAD_PENDING		1	/* a call to hpzerod in flight */
#define PRELOAD_REGISTERED	2
#define PRELOAD_HANDED		3	/* the program's own uffd has it */

struct preload_map {
	int		 state;
	uintptr_t	 addr;
	size_t		 len;
	size_t		 page;
	int		 fd;		/* our copy of the file, or -1 */
	off64_t		 off;
	unsigned int	 flags;		/* as registered */
	dev_t		 dev;		/* the file, for SCM_RIGHTS */
	ino_t		 ino;
	int		 uffd;		/* HANDED: the program's uffd, or -1 */
};

/* The definitions ours hide, found with dlsym(RTLD_NEXT). */
static void	*(*real_mmap)(void *, size_t, int, int, int, off_t);
static void	*(*real_mmap64)(void *, size_t, int, int, int, off64_t);
static int	 (*real_munmap)(void *, size_t);
static void	*(*real_mremap)(void *, size_t, size_t, int, ...);
static int	 (*real_ioctl)(int, unsigned long, ...);
static int	 (*real_close)(int);
static ssize_t	 (*real_sendmsg)(int, const struct msghdr *, int);
static int	 (*real_register)(const struct hpz_region *);
static int	 (*real_memfd_create)(const char *, unsigned int);
static int	 (*real_ftruncate)(int, off_t);
static int	 (*real_ftruncate64)(int, off64_t);

static pthread_once_t		 preload_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t		 preload_lock = PTHREAD_MUTEX_INITIALIZER;
static struct preload_map	 preload_maps[PRELOAD_SLOTS];
static int			 preload_used;	/* slots not free */
static int			 preload_handed;	/* slots handed over */
static int			 preload_discards;	/* registered discard */
static size_t			 preload_min = PRELOAD_MIN_DEFAULT;
static unsigned int		 preload_flags;
static struct runselect		 preload_select;
static int			 preload_verbose;
static int			 preload_off;	/* given up for this process */
static int			 preload_warned;
static int			 preload_started;	/* constructor done */
static void			*preload_libhpz;	/* base of libhpz.so */
static int			 preload_nopool;	/* -f nopool */
static int			 preload_ncandidates;	/* memfds not sized yet */

/* Set while this thread is inside a wrapper: calls made meanwhile pass. */
static __thread int preload_busy __attribute__((tls_model("initial-exec")));

/* One line to stderr, without stdio (we may be called from anywhere). */
static void __attribute__((format(printf, 1, 2)))
preload_say(const char *fmt, ...)
{
	char	buf[512];
	va_list	ap;
	int	n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	(void)!write(STDERR_FILENO, buf, (size_t)n);
}

/* "32 MiB", "64 KiB" or "5000 bytes", for the verbose lines. */
static const char *
preload_size_text(size_t len, char *buf, size_t size)
{
	if (len != 0 && len % (1UL << 20) == 0)
		snprintf(buf, size, "%zu MiB", len >> 20);
	else if (len != 0 && len % 1024 == 0)
		snprintf(buf, size, "%zu KiB", len >> 10);
	else
		snprintf(buf, size, "%zu bytes", len);
	return (buf);
}

/* Our own table goes with the parent's regions: MADV_DONTFORK. */
static void
preload_atfork_child(void)
{
	int	i;

	pthread_mutex_init(&preload_lock, NULL);
	for (i = 0; i < PRELOAD_SLOTS; i++)
		if (preload_maps[i].state != PRELOAD_FREE &&
		    preload_maps[i].fd >= 0)
			syscall(SYS_close, preload_maps[i].fd);
	memset(preload_maps, 0, sizeof(preload_maps));
	__atomic_store_n(&preload_used, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&preload_handed, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&preload_discards, 0, __ATOMIC_RELAXED);
}

/* The next definitions in line; any time, even before our constructor. */
static void
preload_resolve(void)
{
	Dl_info	info;

	preload_busy++;
	real_mmap = (__typeof__(real_mmap))dlsym(RTLD_NEXT, "mmap");
	real_mmap64 = (__typeof__(real_mmap64))dlsym(RTLD_NEXT, "mmap64");
	real_munmap = (__typeof__(real_munmap))dlsym(RTLD_NEXT, "munmap");
	real_mremap = (__typeof__(real_mremap))dlsym(RTLD_NEXT, "mremap");
	real_ioctl = (__typeof__(real_ioctl))dlsym(RTLD_NEXT, "ioctl");
	real_close = (__typeof__(real_close))dlsym(RTLD_NEXT, "close");
	real_sendmsg = (__typeof__(real_sendmsg))dlsym(RTLD_NEXT, "sendmsg");
	real_register = (__typeof__(real_register))dlsym(RTLD_NEXT,
	    "hpz_register");
	real_memfd_create = (__typeof__(real_memfd_create))dlsym(RTLD_NEXT,
	    "memfd_create");
	real_ftruncate = (__typeof__(real_ftruncate))dlsym(RTLD_NEXT,
	    "ftruncate");
	real_ftruncate64 = (__typeof__(real_ftruncate64))dlsym(RTLD_NEXT,
	    "ftruncate64");
	if (real_register != NULL && dladdr((void *)real_register, &info) != 0)
		preload_libhpz = info.dli_fbase;
	preload_busy--;
}

/*
 * The settings, read once the C library is up: a runtime that maps memory
 * in its own early start-up (ASan does) may come first, and is left alone.
 */
static void __attribute__((constructor))
preload_init(void)
{
	const char	*s;
	char		 bad[64];
	uint64_t	 min;

	preload_busy++;
	pthread_once(&preload_once, preload_resolve);
	if (real_register == NULL)
		preload_off = 1;
	if ((s = getenv("HPZ_RUN_MIN")) != NULL && *s != '\0') {
		if (size_parse(s, &min) != 0 || min > SIZE_MAX)
			preload_say("hpz-run: HPZ_RUN_MIN=%s is not a size; "
			    "using 64M", s);
		else
			preload_min = (size_t)min;
	}
	if ((s = getenv("HPZ_RUN_FLAGS")) != NULL &&
	    runflags_parse(s, &preload_flags, bad, sizeof(bad)) != 0) {
		preload_say("hpz-run: HPZ_RUN_FLAGS: unknown flag '%s'; "
		    "using none", bad);
		preload_flags = 0;
	}
	if (runselect_init(&preload_select, getenv(RUNSELECT_ENV_NAME),
	    getenv(RUNSELECT_ENV_EXCLUDE), getenv(RUNSELECT_ENV_FILE), bad,
	    sizeof(bad)) != 0) {
		/* A selection we cannot read must not widen to everything. */
		preload_say("hpz-run: " RUNSELECT_ENV_FILE ": '%s' is not "
		    "DEV:INO; registering nothing", bad);
		preload_off = 1;
	}
	preload_nopool = (preload_flags & RUNFLAG_NOPOOL) != 0 ||
	    ((s = getenv("HPZ_NO_POOL")) != NULL && *s != '\0' &&
	    strcmp(s, "0") != 0);
	preload_flags &= ~RUNFLAG_NOPOOL;
	if ((s = getenv("HPZ_RUN_VERBOSE")) != NULL && *s != '\0' &&
	    strcmp(s, "0") != 0)
		preload_verbose = 1;
	pthread_atfork(NULL, NULL, preload_atfork_child);
	__atomic_store_n(&preload_started, 1, __ATOMIC_RELEASE);
	preload_busy--;
}

/*
 * The next mmap in line, or the system call itself while it is not known
 * (an allocator that maps memory before our constructor ran).
 */
static void *
preload_real_mmap(void *addr, size_t len, int prot, int flags, int fd,
    off64_t off, int is64)
{
	if (is64 && real_mmap64 != NULL)
		return (real_mmap64(addr, len, prot, flags, fd, off));
	if (!is64 && real_mmap != NULL)
		return (real_mmap(addr, len, prot, flags, fd, (off_t)off));
#ifdef SYS_mmap2
	return ((void *)syscall(SYS_mmap2, addr, len, prot, flags, fd,
	    (unsigned long)(off / 4096)));
#else
	return ((void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off));
#endif
}

static int
preload_real_munmap(void *addr, size_t len)
{
	if (real_munmap != NULL)
		return (real_munmap(addr, len));
	return ((int)syscall(SYS_munmap, addr, len));
}

static int
preload_real_ioctl(int fd, unsigned long req, void *arg)
{
	if (real_ioctl != NULL)
		return (real_ioctl(fd, req, arg));
	return ((int)syscall(SYS_ioctl, fd, req, arg));
}

static int
preload_real_close(int fd)
{
	if (real_close != NULL)
		return (real_close(fd));
	return ((int)syscall(SYS_close, fd));
}

/* Whether this call may do our work: not a nested one, not too early. */
static int
preload_ready(void)
{
	if (preload_busy)
		return (0);
	pthread_once(&preload_once, preload_resolve);
	return (__atomic_load_n(&preload_started, __ATOMIC_ACQUIRE));
}

/* Was this call made from inside libhpz (its own uffds, its own maps)? */
static int
preload_from_libhpz(const void *caller)
{
	Dl_info	info;

	return (preload_libhpz != NULL && caller != NULL &&
	    dladdr(caller, &info) != 0 && info.dli_fbase == preload_libhpz);
}

/* Page size of a hugetlbfs or shmem file; 0 for any other. */
static size_t
preload_page_size(int fd)
{
	struct statfs	sfs;

	if (fstatfs(fd, &sfs) == -1)
		return (0);
	if ((long)sfs.f_type == HUGETLBFS_MAGIC)
		return ((size_t)sfs.f_bsize);
	if ((long)sfs.f_type == TMPFS_MAGIC)
		return ((size_t)sysconf(_SC_PAGESIZE));
	return (0);
}

/* Whether a mapping just made is one for hpzerod; its page size if so. */
static size_t
preload_wants(void *addr, size_t len, int prot, int flags, int fd,
    off64_t off, const void *caller)
{
	struct stat	 sb;
	const char	*why;
	char		 name[PATH_MAX], sz[32];
	size_t		 page;
	int		 type = flags & MAP_TYPE;

	if (__atomic_load_n(&preload_off, __ATOMIC_RELAXED))
		return (0);
	if (fd < 0 || (flags & MAP_ANONYMOUS) != 0 ||
	    (type != MAP_SHARED && type != MAP_SHARED_VALIDATE) ||
	    (prot & PROT_WRITE) == 0 || len < preload_min || len == 0)
		return (0);
	if ((page = preload_page_size(fd)) == 0 || len % page != 0 ||
	    (uint64_t)off % page != 0)
		return (0);
	/* libhpz's own (hpz_region_create): its caller registers them. */
	if (preload_from_libhpz(caller))
		return (0);
	if (runselect_active(&preload_select)) {
		if (fstat(fd, &sb) == -1)
			return (0);
		runselect_fd_name(fd, name, sizeof(name));
		if (!runselect_match(&preload_select, name, sb.st_dev,
		    sb.st_ino, &why)) {
			if (preload_verbose)
				preload_say("hpz-run: [%d] left %s at %p (%s) "
				    "to the kernel: %s", (int)getpid(),
				    preload_size_text(len, sz, sizeof(sz)),
				    addr, name, why);
			return (0);
		}
	}
	return (page);
}

/* The one warning a process gets, then hpzerod is left alone. */
static void
preload_give_up(int error)
{
	const char	*sock = getenv("HPZ_SOCKET");

	__atomic_store_n(&preload_off, 1, __ATOMIC_RELAXED);
	if (__atomic_exchange_n(&preload_warned, 1, __ATOMIC_RELAXED))
		return;
	if (sock == NULL || *sock == '\0')
		sock = HPZ_SOCKET_DEFAULT;
	switch (error) {
	case -ENOTSUP:
	case -ENOSYS:
	case -EPERM:
		preload_say("hpz-run: hpzerod cannot serve this process: %s; "
		    "running without it", hpz_last_error());
		break;
	default:
		preload_say("hpz-run: hpzerod not reachable at %s: %s; "
		    "running without it", sock, strerror(-error));
		break;
	}
}

/* Forget a slot (preload_lock held); its copy of the file is closed. */
static void
preload_slot_free(struct preload_map *m)
{
	if (m->state == PRELOAD_HANDED)
		__atomic_sub_fetch(&preload_handed, 1, __ATOMIC_RELAXED);
	if (m->state == PRELOAD_REGISTERED && (m->flags & HPZ_DISCARD))
		__atomic_sub_fetch(&preload_discards, 1, __ATOMIC_RELAXED);
	if (m->fd >= 0)
		preload_real_close(m->fd);
	memset(m, 0, sizeof(*m));
	m->fd = -1;
	m->state = PRELOAD_FREE;
	__atomic_sub_fetch(&preload_used, 1, __ATOMIC_RELAXED);
}

/* A slot's mapping, as hpz_register takes it. */
static void
preload_slot_region(const struct preload_map *m, struct hpz_region *r)
{
	memset(r, 0, sizeof(*r));
	r->addr = (void *)m->addr;
	r->len = m->len;
	r->fd = m->fd;
	r->offset = (off_t)m->off;
	r->flags = m->flags;
}

/* Register a fresh mapping; any failure leaves it to the kernel. */
static void
preload_register(void *addr, size_t len, int fd, off64_t off, size_t page)
{
	struct preload_map	*m;
	struct hpz_region	 r;
	struct stat		 sb;
	unsigned int		 flags = preload_flags;
	char			 fl[64], sz[32];
	int			 slot, error, copy;
	pid_t			 other;

	if (fstat(fd, &sb) == -1)
		return;
	pthread_mutex_lock(&preload_lock);
	for (slot = 0; slot < PRELOAD_SLOTS; slot++)
		if (preload_maps[slot].state == PRELOAD_FREE)
			break;
	if (slot == PRELOAD_SLOTS) {
		pthread_mutex_unlock(&preload_lock);
		if (preload_verbose)
			preload_say("hpz-run: [%d] %d mappings registered "
			    "already; leaving %zu bytes at %p to the kernel",
			    (int)getpid(), PRELOAD_SLOTS, len, addr);
		return;
	}
	m = &preload_maps[slot];
	m->state = PRELOAD_PENDING;
	m->fd = -1;
	__atomic_add_fetch(&preload_used, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&preload_lock);

	/*
	 * Garbage is guarded by our uffd only: never declare a file's pages
	 * garbage while another process maps them (hpz_register(3)).
	 */
	if ((flags & HPZ_DISCARD) && (other = mappers_other(fd, (uint64_t)off,
	    len)) > 0) {
		flags &= ~HPZ_DISCARD;
		preload_say("hpz-run: [%d] pid %d maps the file of %s at %p "
		    "too: registered without discard, its contents kept",
		    (int)getpid(), (int)other, preload_size_text(len, sz,
		    sizeof(sz)), addr);
	}
	/* Ours, to register the range again after a hand-over. */
	copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);

	memset(&r, 0, sizeof(r));
	r.addr = addr;
	r.len = len;
	r.fd = fd;
	r.offset = (off_t)off;
	r.flags = flags;
	error = real_register(&r);

	pthread_mutex_lock(&preload_lock);
	if (error == 0) {
		m->addr = (uintptr_t)addr;
		m->len = len;
		m->page = page;
		m->fd = copy;
		m->off = off;
		m->flags = flags;
		m->dev = sb.st_dev;
		m->ino = sb.st_ino;
		m->uffd = -1;
		m->state = PRELOAD_REGISTERED;
		if (flags & HPZ_DISCARD)
			__atomic_add_fetch(&preload_discards, 1,
			    __ATOMIC_RELAXED);
	} else {
		m->fd = copy;
		preload_slot_free(m);
	}
	pthread_mutex_unlock(&preload_lock);

	switch (error) {
	case 0:
		if (preload_verbose)
			preload_say("hpz-run: [%d] registered %s at %p "
			    "(fd %d, offset %lld, %zu KiB pages, flags %s)",
			    (int)getpid(), preload_size_text(len, sz,
			    sizeof(sz)), addr, fd,
			    (long long)off, page >> 10,
			    runflags_text(flags, fl, sizeof(fl)));
		break;
	case -EBUSY:
		/* The program serves this range itself. */
		if (preload_verbose)
			preload_say("hpz-run: [%d] %p is taken: %s",
			    (int)getpid(), addr, hpz_last_error());
		break;
	case -ECONNREFUSED:
	case -ENOENT:
	case -ENOTDIR:
	case -EACCES:
	case -ENAMETOOLONG:
	case -ECONNRESET:
	case -EPIPE:
	case -ETIMEDOUT:
	case -ENOTSUP:
	case -ENOSYS:
	case -EPERM:
		preload_give_up(error);
		break;
	default:
		/* This mapping only (a daemon limit, say): say it once. */
		if (!__atomic_exchange_n(&preload_warned, 1,
		    __ATOMIC_RELAXED) || preload_verbose)
			preload_say("hpz-run: [%d] hpzerod did not take %zu "
			    "bytes at %p: %s; the kernel serves them",
			    (int)getpid(), len, addr, hpz_last_error());
		break;
	}
}

/*
 * Unregister every region of ours that [addr, addr+len) touches, whole,
 * before the caller unmaps, moves or maps over any part of it.  A region
 * the kernel would refuse to cut there (a hugetlb range not aligned to its
 * page) is kept: the call fails with EINVAL and changes nothing.  A range
 * handed over to the program's uffd is only forgotten.
 */
static void
preload_release(const void *addr, size_t len)
{
	struct preload_map	 gone;
	struct hpz_region	 r;
	char			 sz[32];
	uintptr_t		 start = (uintptr_t)addr, end, ps;
	int			 i, error;

	if (len == 0 || __atomic_load_n(&preload_used, __ATOMIC_RELAXED) == 0)
		return;
	ps = (uintptr_t)sysconf(_SC_PAGESIZE);
	end = start + len < start || start + len > UINTPTR_MAX - ps ?
	    UINTPTR_MAX : (start + len + ps - 1) & ~(ps - 1);
	for (;;) {
		/* One at a time: never call out with the table locked. */
		pthread_mutex_lock(&preload_lock);
		for (i = 0; i < PRELOAD_SLOTS; i++) {
			struct preload_map	*m = &preload_maps[i];

			if ((m->state != PRELOAD_REGISTERED &&
			    m->state != PRELOAD_HANDED) || end <= m->addr ||
			    start >= m->addr + m->len)
				continue;
			if ((start > m->addr && start % m->page != 0) ||
			    (end < m->addr + m->len && end % m->page != 0))
				continue;
			gone = *m;
			preload_slot_free(m);
			break;
		}
		pthread_mutex_unlock(&preload_lock);
		if (i == PRELOAD_SLOTS)
			return;
		if (gone.state == PRELOAD_HANDED)
			continue;

		memset(&r, 0, sizeof(r));
		r.addr = (void *)gone.addr;
		r.len = gone.len;
		r.fd = -1;
		error = hpz_unregister(&r);
		if (error == 0 && preload_verbose)
			preload_say("hpz-run: [%d] unregistered %s at %p",
			    (int)getpid(), preload_size_text(gone.len, sz,
			    sizeof(sz)), r.addr);
		else if (error != 0 && (preload_verbose ||
		    !__atomic_exchange_n(&preload_warned, 1, __ATOMIC_RELAXED)))
			preload_say("hpz-run: [%d] cannot unregister %s at %p: "
			    "%s", (int)getpid(), preload_size_text(gone.len,
			    sz, sizeof(sz)), r.addr, hpz_last_error());
	}
}

/*
 * The program is about to register its own uffd on [start, end): every
 * region of ours there is unregistered first.  hpzerod drops its garbage
 * from the file (holes read zero) and lets go of the range, so the
 * program's uffd sees only data and holes.  How many went.
 */
static int
preload_hand_over(int uffd, uintptr_t start, uintptr_t end)
{
	struct preload_map	*m;
	struct hpz_region	 r;
	char			 sz[32];
	int			 i, error, n = 0;

	for (i = 0; i < PRELOAD_SLOTS; i++) {
		m = &preload_maps[i];
		pthread_mutex_lock(&preload_lock);
		if (m->state != PRELOAD_REGISTERED || end <= m->addr ||
		    start >= m->addr + m->len) {
			pthread_mutex_unlock(&preload_lock);
			continue;
		}
		m->state = PRELOAD_PENDING;
		if (m->flags & HPZ_DISCARD)
			__atomic_sub_fetch(&preload_discards, 1,
			    __ATOMIC_RELAXED);
		preload_slot_region(m, &r);
		pthread_mutex_unlock(&preload_lock);

		error = hpz_unregister(&r);

		pthread_mutex_lock(&preload_lock);
		if (error == 0) {
			m->state = PRELOAD_HANDED;
			m->flags &= ~HPZ_DISCARD;
			m->uffd = uffd;
			__atomic_add_fetch(&preload_handed, 1,
			    __ATOMIC_RELAXED);
			n++;
		} else {
			m->state = PRELOAD_REGISTERED;
			if (m->flags & HPZ_DISCARD)
				__atomic_add_fetch(&preload_discards, 1,
				    __ATOMIC_RELAXED);
		}
		pthread_mutex_unlock(&preload_lock);
		if (error == 0 && preload_verbose)
			preload_say("hpz-run: [%d] handed %s at %p over to the "
			    "program's userfaultfd %d", (int)getpid(),
			    preload_size_text(r.len, sz, sizeof(sz)), r.addr,
			    uffd);
		else if (error != 0)
			preload_say("hpz-run: [%d] cannot hand %s at %p over to "
			    "the program's userfaultfd (its UFFDIO_REGISTER "
			    "will fail with EBUSY): %s", (int)getpid(),
			    preload_size_text(r.len, sz, sizeof(sz)), r.addr,
			    hpz_last_error());
	}
	return (n);
}

/*
 * The program let go of ranges: of [start, end) (UFFDIO_UNREGISTER; both
 * 0: none), or of everything its uffd closed held (closed; -1: none).
 * Register what we handed over there again, as data: what the program
 * placed meanwhile is kept, holes are filled with pages the kernel zeroes.
 * A range still held by a uffd of the program (EBUSY) stays handed over
 * until the next time.
 */
static void
preload_take_back(int closed, uintptr_t start, uintptr_t end)
{
	struct preload_map	*m;
	struct hpz_region	 r;
	char			 sz[32];
	int			 i, error;

	for (i = 0; i < PRELOAD_SLOTS; i++) {
		m = &preload_maps[i];
		pthread_mutex_lock(&preload_lock);
		if (m->state != PRELOAD_HANDED || (m->uffd >= 0 &&
		    m->uffd != closed && (end <= m->addr ||
		    start >= m->addr + m->len))) {
			pthread_mutex_unlock(&preload_lock);
			continue;
		}
		if (m->fd < 0) {
			/* No copy of the file: the kernel keeps serving it. */
			preload_slot_free(m);
			pthread_mutex_unlock(&preload_lock);
			continue;
		}
		m->state = PRELOAD_PENDING;
		__atomic_sub_fetch(&preload_handed, 1, __ATOMIC_RELAXED);
		preload_slot_region(m, &r);
		pthread_mutex_unlock(&preload_lock);

		error = real_register(&r);

		pthread_mutex_lock(&preload_lock);
		if (error == 0) {
			m->state = PRELOAD_REGISTERED;
			m->uffd = -1;
		} else if (error == -EBUSY) {
			m->state = PRELOAD_HANDED;
			__atomic_add_fetch(&preload_handed, 1,
			    __ATOMIC_RELAXED);
			if (m->uffd == closed)
				m->uffd = -1;
		} else
			preload_slot_free(m);
		pthread_mutex_unlock(&preload_lock);
		if (error == 0 && preload_verbose)
			preload_say("hpz-run: [%d] took %s at %p back from the "
			    "program's userfaultfd", (int)getpid(),
			    preload_size_text(r.len, sz, sizeof(sz)), r.addr);
		else if (error != 0 && error != -EBUSY)
			preload_say("hpz-run: [%d] cannot register %s at %p "
			    "again after the program's userfaultfd: %s; the "
			    "kernel serves it", (int)getpid(),
			    preload_size_text(r.len, sz, sizeof(sz)), r.addr,
			    hpz_last_error());
	}
}

/*
 * The file open on fd goes to another process, which may map it where our
 * uffd guards nothing: a region of that file that may still hold garbage
 * (registered with discard) gives it up first, and is registered again
 * as data.
 */
static void
preload_settle(int fd)
{
	struct preload_map	*m;
	struct hpz_region	 r;
	struct stat		 sb;
	char			 sz[32];
	int			 i, error;

	if (fstat(fd, &sb) == -1)
		return;
	for (i = 0; i < PRELOAD_SLOTS; i++) {
		m = &preload_maps[i];
		pthread_mutex_lock(&preload_lock);
		if (m->state != PRELOAD_REGISTERED ||
		    (m->flags & HPZ_DISCARD) == 0 || m->dev != sb.st_dev ||
		    m->ino != sb.st_ino) {
			pthread_mutex_unlock(&preload_lock);
			continue;
		}
		m->state = PRELOAD_PENDING;
		__atomic_sub_fetch(&preload_discards, 1, __ATOMIC_RELAXED);
		preload_slot_region(m, &r);
		pthread_mutex_unlock(&preload_lock);

		/* The daemon drops the garbage from the file on unregister. */
		if ((error = hpz_unregister(&r)) == 0) {
			r.flags &= ~HPZ_DISCARD;
			if (r.fd < 0 || (error = real_register(&r)) != 0)
				error = error != 0 ? error : -EBADF;
			pthread_mutex_lock(&preload_lock);
			if (error == 0) {
				m->flags = r.flags;
				m->state = PRELOAD_REGISTERED;
			} else
				preload_slot_free(m);
			pthread_mutex_unlock(&preload_lock);
			preload_say("hpz-run: [%d] the file of %s at %p goes to "
			    "another process: its garbage was dropped first%s",
			    (int)getpid(), preload_size_text(r.len, sz,
			    sizeof(sz)), r.addr, error == 0 ? "" :
			    "; the kernel serves it from now on");
			continue;
		}
		/* Still registered, garbage and all: it must not go. */
		pthread_mutex_lock(&preload_lock);
		m->state = PRELOAD_REGISTERED;
		__atomic_add_fetch(&preload_discards, 1, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&preload_lock);
		preload_say("hpz-run: [%d] the file of %s at %p goes to another "
		    "process with garbage in it: cannot drop it: %s",
		    (int)getpid(), preload_size_text(r.len, sz, sizeof(sz)),
		    r.addr, hpz_last_error());
	}
}
static int	preload_pool_map(void *, size_t, int, off64_t);
static void	preload_pool_forget(int);
/* Bumped by every munmap and fixed mmap: a populate ahead stops. */
static unsigned long	preload_map_gen;

static void *
preload_mmap(void *addr, size_t len, int prot, int flags, int fd,
    off64_t off, int is64, const void *caller)
{
	void	*p;
	size_t	 page;
	int	 saved = errno;

	if (!preload_ready())
		return (preload_real_mmap(addr, len, prot, flags, fd, off,
		    is64));
	preload_busy++;
	/* A fixed mapping replaces what was there, registration and all. */
	if ((flags & MAP_FIXED) != 0) {
		__atomic_add_fetch(&preload_map_gen, 1, __ATOMIC_RELAXED);
		preload_release(addr, len);
	}
	/* A memfd mapped before it is sized keeps its own file. */
	if (fd >= 0 &&
	    __atomic_load_n(&preload_ncandidates, __ATOMIC_RELAXED) != 0)
		preload_pool_forget(fd);
	errno = saved;
	p = preload_real_mmap(addr, len, prot, flags, fd, off, is64);
	if (p != MAP_FAILED && (page = preload_wants(p, len, prot, flags, fd,
	    off, caller)) != 0) {
		saved = errno;
		if (!preload_pool_map(p, len, fd, off))
			preload_register(p, len, fd, off, page);
		errno = saved;
	}
	preload_busy--;
	return (p);
}

void *
mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (preload_mmap(addr, len, prot, flags, fd, (off64_t)off, 0,
	    __builtin_return_address(0)));
}

void *
mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
	return (preload_mmap(addr, len, prot, flags, fd, off, 1,
	    __builtin_return_address(0)));
}

int
munmap(void *addr, size_t len)
{
	int	saved = errno;

	__atomic_add_fetch(&preload_map_gen, 1, __ATOMIC_RELAXED);
	if (preload_ready()) {
		preload_busy++;
		preload_release(addr, len);
		preload_busy--;
		errno = saved;
	}
	return (preload_real_munmap(addr, len));
}

void *
mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	va_list	 ap;
	void	*new_addr = NULL;
	int	 saved = errno;

	if ((flags & MREMAP_FIXED) != 0) {
		va_start(ap, flags);
		new_addr = va_arg(ap, void *);
		va_end(ap);
	}
	/* The kernel drops a moved range's registration: so do we, first. */
	if (preload_ready()) {
		preload_busy++;
		preload_release(old, old_len);
		if ((flags & MREMAP_FIXED) != 0)
			preload_release(new_addr, new_len);
		preload_busy--;
		errno = saved;
	}
	if (real_mremap != NULL)
		return (real_mremap(old, old_len, new_len, flags, new_addr));
	return ((void *)syscall(SYS_mremap, old, old_len, new_len, flags,
	    new_addr));
}

/* --- the pool ------------------------------------------------------------- */

/*
 * memfd_create gives the program a memfd of its own at once (a probe such
 * as QEMU's qemu_memfd_check closes it again, and must not cost the pool a
 * file); its first ftruncate, which says how much memory it wants, swaps
 * a pool file in under the same fd number.  The memfd's name is set when
 * it is made, so the file keeps the pool's ("hpz-pool"); the name the
 * program asked for is sent along for the daemon's log.
 */
#define PRELOAD_MEMFDS		16

struct preload_memfd {
	int		 state;		/* 0 free, 1 a candidate, 2 a pool file */
	int		 fd;
	dev_t		 dev;		/* the file fd is, to know it again */
	ino_t		 ino;
	unsigned int	 flags;		/* the program's memfd_create flags */
	unsigned int	 page;		/* HPZ_PAGE_2M or HPZ_PAGE_1G */
	size_t		 ready;		/* pool file: bytes allocated, zero */
	char		 name[64];
};

static struct preload_memfd	 preload_memfds[PRELOAD_MEMFDS];

/* HPZ_PAGE_* of a memfd_create(MFD_HUGETLB) size, or -1. */
static int
preload_memfd_page(unsigned int flags)
{
	unsigned int	 shift = (flags >> MFD_HUGE_SHIFT) & MFD_HUGE_MASK;
	char		 line[128];
	unsigned long	 kb = 0;
	FILE		*f;

	if (shift == 0) {
		/* The default huge page size. */
		if ((f = fopen("/proc/meminfo", "re")) == NULL)
			return (-1);
		while (fgets(line, sizeof(line), f) != NULL)
			if (sscanf(line, "Hugepagesize: %lu kB", &kb) == 1)
				break;
		fclose(f);
		shift = kb == 2048 ? 21 : kb == 1048576 ? 30 : 0;
	}
	if (shift == 21)
		return (HPZ_PAGE_2M);
	if (shift == 30)
		return (HPZ_PAGE_1G);
	return (-1);
}

/* The slot of fd if it is still the file recorded there, else NULL. */
static struct preload_memfd *
preload_memfd_find(int fd, int state)
{
	struct preload_memfd	*m;
	struct stat		 st;
	int			 i;

	if (fstat(fd, &st) == -1)
		return (NULL);
	for (i = 0; i < PRELOAD_MEMFDS; i++) {
		m = &preload_memfds[i];
		if (m->state == state && m->dev == st.st_dev &&
		    m->ino == st.st_ino && (state == 2 || m->fd == fd))
			return (m);
	}
	return (NULL);
}

int
memfd_create(const char *name, unsigned int flags)
{
	static const unsigned int ours = MFD_CLOEXEC | MFD_ALLOW_SEALING |
	    MFD_HUGETLB | (MFD_HUGE_MASK << MFD_HUGE_SHIFT);
	struct preload_memfd	*m;
	struct stat		 st;
	int			 fd, page, i, saved;

	pthread_once(&preload_once, preload_resolve);
	if (real_memfd_create == NULL) {
		errno = ENOSYS;
		return (-1);
	}
	fd = real_memfd_create(name, flags);
	if (fd < 0 || (flags & MFD_HUGETLB) == 0 || (flags & ~ours) != 0 ||
	    preload_nopool || !preload_ready() ||
	    __atomic_load_n(&preload_off, __ATOMIC_RELAXED))
		return (fd);
	saved = errno;
	preload_busy++;
	/* libhpz's own memfds come after it asked the pool itself. */
	if ((page = preload_memfd_page(flags)) >= 0 && fstat(fd, &st) == 0 &&
	    !preload_from_libhpz(__builtin_return_address(0))) {
		pthread_mutex_lock(&preload_lock);
		for (i = 0; i < PRELOAD_MEMFDS; i++)
			if (preload_memfds[i].state == 0)
				break;
		if (i < PRELOAD_MEMFDS) {
			m = &preload_memfds[i];
			m->state = 1;
			m->fd = fd;
			m->dev = st.st_dev;
			m->ino = st.st_ino;
			m->flags = flags;
			m->page = (unsigned int)page;
			m->ready = 0;
			snprintf(m->name, sizeof(m->name), "%s",
			    name != NULL ? name : "");
			__atomic_add_fetch(&preload_ncandidates, 1,
			    __ATOMIC_RELAXED);
		}
		pthread_mutex_unlock(&preload_lock);
	}
	preload_busy--;
	errno = saved;
	return (fd);
}

/* fd is mapped (or used) as it is: it must stay the program's own file. */
static void
preload_pool_forget(int fd)
{
	struct preload_memfd	*m;

	pthread_mutex_lock(&preload_lock);
	if ((m = preload_memfd_find(fd, 1)) != NULL) {
		m->state = 0;
		__atomic_sub_fetch(&preload_ncandidates, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&preload_lock);
}

/*
 * The program sizes a memfd it made: if it is still empty and unsealed,
 * put a pool file in its place (same fd, same flags), then size that.
 */
static void
preload_pool_swap(int fd, off64_t len)
{
	struct preload_memfd	*m, mine;
	struct stat		 st;
	char			 sz[32];
	size_t			 ready = 0;
	int			 pfd, seals;

	pthread_mutex_lock(&preload_lock);
	if ((m = preload_memfd_find(fd, 1)) == NULL) {
		pthread_mutex_unlock(&preload_lock);
		return;
	}
	mine = *m;
	m->state = 0;	/* sized once: a candidate no more */
	__atomic_sub_fetch(&preload_ncandidates, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&preload_lock);

	seals = fcntl(fd, F_GET_SEALS);
	if (len < (off64_t)preload_min || fstat(fd, &st) == -1 ||
	    st.st_size != 0 || (seals != 0 && seals != F_SEAL_SEAL))
		return;
	/* What it asks for, no more: the rest of the pool is the others'. */
	if ((pfd = hpz_pool_take((size_t)len, mine.page, mine.name,
	    &ready)) < 0) {
		/* ENOENT: the pool is off; not worth a line. */
		if (preload_verbose && pfd != -ENOENT)
			preload_say("hpz-run: [%d] memfd '%s': no pool file: "
			    "%s", (int)getpid(), mine.name, hpz_last_error());
		return;
	}
	if (dup3(pfd, fd, (mine.flags & MFD_CLOEXEC) ? O_CLOEXEC : 0) != fd) {
		close(pfd);
		return;
	}
	close(pfd);
	/* A memfd made without MFD_ALLOW_SEALING takes no seals. */
	if ((mine.flags & MFD_ALLOW_SEALING) == 0)
		(void)fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL);
	if (fstat(fd, &st) == -1)
		return;
	pthread_mutex_lock(&preload_lock);
	/* Room for it, else the oldest record goes. */
	for (m = &preload_memfds[0]; m < &preload_memfds[PRELOAD_MEMFDS]; m++)
		if (m->state == 0)
			break;
	if (m == &preload_memfds[PRELOAD_MEMFDS])
		m = &preload_memfds[0];
	*m = mine;
	m->state = 2;
	m->dev = st.st_dev;
	m->ino = st.st_ino;
	m->ready = ready;
	pthread_mutex_unlock(&preload_lock);
	if (preload_verbose)
		preload_say("hpz-run: [%d] memfd '%s' (fd %d): a pool file, "
		    "%s allocated and zero", (int)getpid(), mine.name, fd,
		    preload_size_text(ready, sz, sizeof(sz)));
}

static int
preload_ftruncate(int fd, off64_t len, int is64, const void *caller)
{
	int	saved = errno;

	if (__atomic_load_n(&preload_ncandidates, __ATOMIC_RELAXED) != 0 &&
	    preload_ready() && !preload_from_libhpz(caller)) {
		preload_busy++;
		preload_pool_swap(fd, len);
		preload_busy--;
		errno = saved;
	}
	if (is64 && real_ftruncate64 != NULL)
		return (real_ftruncate64(fd, len));
	if (!is64 && real_ftruncate != NULL)
		return (real_ftruncate(fd, (off_t)len));
	return ((int)syscall(SYS_ftruncate, fd, len));
}

int
ftruncate(int fd, off_t len)
{
	return (preload_ftruncate(fd, (off64_t)len, 0,
	    __builtin_return_address(0)));
}

int
ftruncate64(int fd, off64_t len)
{
	return (preload_ftruncate(fd, len, 1, __builtin_return_address(0)));
}

/* The rest of a pool file's mapping, populated from its end (a thread). */
struct preload_ahead {
	char		*lo;
	char		*hi;
	size_t		 page;
	unsigned long	 gen;
};

/*
 * At SCHED_IDLE: only cores with nothing else to do zero the rest, from
 * the end, while the program (QEMU's prealloc) works from the start; both
 * fault the same file, so a page either of them allocated is done for the
 * other.  It stops at the first munmap or fixed mmap of the program's, or
 * at the first error.
 */
static void *
preload_ahead_main(void *arg)
{
	struct preload_ahead	a = *(struct preload_ahead *)arg;
	struct sched_param	sp;
	char			*p;

	free(arg);
	memset(&sp, 0, sizeof(sp));
	(void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
	for (p = a.hi; p > a.lo; p -= a.page)
		if (__atomic_load_n(&preload_map_gen, __ATOMIC_RELAXED) !=
		    a.gen || madvise(p - a.page, a.page, MADV_POPULATE_READ) !=
		    0)
			break;
	return (NULL);
}

static void
preload_ahead(char *lo, char *hi, size_t page)
{
	struct preload_ahead	*a;
	pthread_attr_t		 at;
	pthread_t		 t;

	if (hi <= lo || (a = malloc(sizeof(*a))) == NULL)
		return;
	a->lo = lo;
	a->hi = hi;
	a->page = page;
	a->gen = __atomic_load_n(&preload_map_gen, __ATOMIC_RELAXED);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &at, preload_ahead_main, a) != 0)
		free(a);
	pthread_attr_destroy(&at);
}

/*
 * A mapping of a pool file: its pages are allocated and zero, so there is
 * nothing for hpzerod to do on them unless the flags ask for work
 * (allocation ahead of the rest, discard); registering would only put a
 * round trip on each first touch.  Its pages are mapped here at once
 * (unless nopremap).  1 if the mapping is to be left to the kernel.
 */
static int
preload_pool_map(void *addr, size_t len, int fd, off64_t off)
{
	struct preload_memfd	*m;
	size_t			 ready = 0, n, page = 0;
	char			 sz[32], sz2[32];
	int			 pool;

	pthread_mutex_lock(&preload_lock);
	if ((pool = (m = preload_memfd_find(fd, 2)) != NULL)) {
		ready = m->ready;
		page = m->page == HPZ_PAGE_1G ? 1UL << 30 : 2UL << 20;
	}
	pthread_mutex_unlock(&preload_lock);
	if (!pool)
		return (0);
	n = (size_t)off < ready ? ready - (size_t)off : 0;
	if (n > len)
		n = len;
	/* Premapping is the default: 0.5 us a page, against a touch's 15. */
	if ((preload_flags & HPZ_NO_PREMAP) == 0 && n > 0)
		(void)madvise(addr, n, MADV_POPULATE_WRITE);
	if ((preload_flags & (HPZ_AHEAD_EAGER | HPZ_AHEAD_ONFAULT |
	    HPZ_DISCARD)) != 0)
		return (0);
	/* More than the pool had: the rest ahead, on idle cores. */
	if ((preload_flags & HPZ_NO_PREMAP) == 0 && n < len && page > 0 &&
	    len % page == 0)
		preload_ahead((char *)addr + n, (char *)addr + len, page);
	if (preload_verbose)
		preload_say("hpz-run: [%d] %s at %p is a pool file: left to "
		    "the kernel (%s of it allocated and zero)", (int)getpid(),
		    preload_size_text(len, sz, sizeof(sz)), addr,
		    preload_size_text(n, sz2, sizeof(sz2)));
	return (1);
}

/*
 * The range of a UFFDIO_REGISTER or UNREGISTER argument (both begin with
 * one), read the way the kernel will: a bad pointer is the kernel's EFAULT
 * to give, not a crash of ours.  0, or -1 if it cannot be read.
 */
static int
preload_peek_range(const void *arg, struct uffdio_range *range)
{
	struct iovec	local, remote;

	local.iov_base = range;
	local.iov_len = sizeof(*range);
	remote.iov_base = (void *)(uintptr_t)arg;
	remote.iov_len = sizeof(*range);
	if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) ==
	    (ssize_t)sizeof(*range))
		return (0);
	if (errno == EFAULT || arg == NULL)
		return (-1);
	/* No process_vm_readv here (a filter): read it as the kernel will. */
	memcpy(range, arg, sizeof(*range));
	return (0);
}

/*
 * The program's own userfaultfd: a UFFDIO_REGISTER on a range of ours
 * takes it over (QEMU's postcopy, background snapshot and their probes),
 * a UFFDIO_UNREGISTER gives it back.  Every other request goes straight
 * on; libhpz's own calls too.
 */
int
ioctl(int fd, unsigned long req, ...)
{
	struct uffdio_range	 range;
	va_list			 ap;
	void			*arg;
	uintptr_t		 start, end;
	int			 rc, saved = errno, handed = 0;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if ((req != UFFDIO_REGISTER && req != UFFDIO_UNREGISTER) ||
	    !preload_ready() ||
	    (req == UFFDIO_REGISTER &&
	    __atomic_load_n(&preload_used, __ATOMIC_RELAXED) == 0) ||
	    (req == UFFDIO_UNREGISTER &&
	    __atomic_load_n(&preload_handed, __ATOMIC_RELAXED) == 0) ||
	    preload_from_libhpz(__builtin_return_address(0)) ||
	    preload_peek_range(arg, &range) != 0 || range.len == 0)
		return (preload_real_ioctl(fd, req, arg));
	start = (uintptr_t)range.start;
	end = start + range.len < start ? UINTPTR_MAX :
	    start + (uintptr_t)range.len;
	preload_busy++;
	if (req == UFFDIO_REGISTER)
		handed = preload_hand_over(fd, start, end);
	errno = saved;
	rc = preload_real_ioctl(fd, req, arg);
	saved = errno;
	/* A probe that failed, or an unregister: ours again. */
	if ((req == UFFDIO_REGISTER && rc == -1 && handed != 0) ||
	    (req == UFFDIO_UNREGISTER && rc == 0))
		preload_take_back(-1, start, end);
	preload_busy--;
	errno = saved;
	return (rc);
}

/* Closing the program's uffd lets go of what it held (QEMU's WP probe). */
int
close(int fd)
{
	int	i, rc, saved, held = 0;

	if (__atomic_load_n(&preload_handed, __ATOMIC_RELAXED) == 0 ||
	    fd < 0 || !preload_ready() ||
	    preload_from_libhpz(__builtin_return_address(0)))
		return (preload_real_close(fd));
	pthread_mutex_lock(&preload_lock);
	for (i = 0; i < PRELOAD_SLOTS && !held; i++)
		held = preload_maps[i].state == PRELOAD_HANDED &&
		    preload_maps[i].uffd == fd;
	pthread_mutex_unlock(&preload_lock);
	rc = preload_real_close(fd);
	if (held) {
		saved = errno;
		preload_busy++;
		preload_take_back(fd, 0, 0);
		preload_busy--;
		errno = saved;
	}
	return (rc);
}

/* A file of a region that may hold garbage must not go out with garbage. */
ssize_t
sendmsg(int sock, const struct msghdr *msg, int flags)
{
	struct cmsghdr	*c;
	const int	*fds;
	size_t		 i, n;
	int		 saved = errno;

	if (msg != NULL && msg->msg_control != NULL &&
	    msg->msg_controllen != 0 &&
	    __atomic_load_n(&preload_discards, __ATOMIC_RELAXED) != 0 &&
	    preload_ready()) {
		preload_busy++;
		for (c = CMSG_FIRSTHDR(msg); c != NULL;
		    c = CMSG_NXTHDR((struct msghdr *)msg, c)) {
			if (c->cmsg_level != SOL_SOCKET ||
			    c->cmsg_type != SCM_RIGHTS ||
			    c->cmsg_len < CMSG_LEN(0))
				continue;
			fds = (const int *)CMSG_DATA(c);
			n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (i = 0; i < n; i++)
				preload_settle(fds[i]);
		}
		preload_busy--;
		errno = saved;
	}
	if (real_sendmsg != NULL)
		return (real_sendmsg(sock, msg, flags));
	return ((ssize_t)syscall(SYS_sendmsg, sock, msg, flags));
}

/*
 * A program that registers with hpzerod itself takes the range over from
 * us: ours goes first, so its hpz_register does not fail with EBUSY.
 */
int
hpz_register(const struct hpz_region *region)
{
	int	error;

	pthread_once(&preload_once, preload_resolve);
	if (region != NULL && preload_ready()) {
		preload_busy++;
		preload_release(region->addr, region->len);
		preload_busy--;
	}
	if (real_register == NULL)
		return (-ENOSYS);
	preload_busy++;
	error = real_register(region);
	preload_busy--;
	return (error);
}
