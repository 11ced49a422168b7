/*
 * preload.c - libhpz-preload.so, the LD_PRELOAD half of hpz-run: a program's
 * large writable MAP_SHARED mappings of hugetlbfs or shmem files are
 * registered with hpzerod as they are made, and unregistered before they
 * are unmapped, moved or mapped over.  A hugetlb memfd the program makes
 * and sizes (memfd_create, then ftruncate: QEMU's memory-backend-memfd)
 * becomes a file of hpzerod's pre-zeroed pool.  Everything else passes
 * untouched, and a failure only ever costs the program hpzerod's help,
 * never a different result or errno.
 */
#if defined(_FILE_OFFSET_BITS) && _FILE_OFFSET_BITS == 64
#undef _FILE_OFFSET_BITS	/* we define both mmap and mmap64 */
#endif

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <linux/memfd.h>

#include "hpz.h"
#include "runflags.h"
#include "size.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23	/* Linux 5.14 */
#endif

#define PRELOAD_MIN_DEFAULT	(64UL << 20)
#define PRELOAD_SLOTS		256	/* registered mappings at once */

/* A slot of the mapping table. */
#define PRELOAD_FREE		0
#define PRELOAD_PENDING		1	/* hpz_register in flight */
#define PRELOAD_REGISTERED	2

struct preload_map {
	int		 state;
	uintptr_t	 addr;
	size_t		 len;
	size_t		 page;
};

/* The definitions ours hide, found with dlsym(RTLD_NEXT). */
static void	*(*real_mmap)(void *, size_t, int, int, int, off_t);
static void	*(*real_mmap64)(void *, size_t, int, int, int, off64_t);
static int	 (*real_munmap)(void *, size_t);
static void	*(*real_mremap)(void *, size_t, size_t, int, ...);
static int	 (*real_register)(const struct hpz_region *);
static int	 (*real_memfd_create)(const char *, unsigned int);
static int	 (*real_ftruncate)(int, off_t);
static int	 (*real_ftruncate64)(int, off64_t);

static pthread_once_t		 preload_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t		 preload_lock = PTHREAD_MUTEX_INITIALIZER;
static struct preload_map	 preload_maps[PRELOAD_SLOTS];
static int			 preload_used;	/* slots not free */
static size_t			 preload_min = PRELOAD_MIN_DEFAULT;
static unsigned int		 preload_flags;
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
	pthread_mutex_init(&preload_lock, NULL);
	memset(preload_maps, 0, sizeof(preload_maps));
	__atomic_store_n(&preload_used, 0, __ATOMIC_RELAXED);
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

/* Whether this call may do our work: not a nested one, not too early. */
static int
preload_ready(void)
{
	if (preload_busy)
		return (0);
	pthread_once(&preload_once, preload_resolve);
	return (__atomic_load_n(&preload_started, __ATOMIC_ACQUIRE));
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

/* Whether caller is code of libhpz (hpz_region_create does its own). */
static int
preload_from_libhpz(const void *caller)
{
	Dl_info	info;

	return (preload_libhpz != NULL && caller != NULL &&
	    dladdr(caller, &info) != 0 && info.dli_fbase == preload_libhpz);
}

/* Whether a mapping just made is one for hpzerod; its page size if so. */
static size_t
preload_wants(size_t len, int prot, int flags, int fd, off64_t off,
    const void *caller)
{
	Dl_info	 info;
	size_t	 page;
	int	 type = flags & MAP_TYPE;

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
	if (preload_libhpz != NULL && caller != NULL &&
	    dladdr(caller, &info) != 0 && info.dli_fbase == preload_libhpz)
		return (0);
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

/* Register a fresh mapping; any failure leaves it to the kernel. */
static void
preload_register(void *addr, size_t len, int fd, off64_t off, size_t page)
{
	struct hpz_region	 r;
	char			 fl[64], sz[32];
	int			 slot, error;

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
	preload_maps[slot].state = PRELOAD_PENDING;
	__atomic_add_fetch(&preload_used, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&preload_lock);

	memset(&r, 0, sizeof(r));
	r.addr = addr;
	r.len = len;
	r.fd = fd;
	r.offset = (off_t)off;
	r.flags = preload_flags;
	error = real_register(&r);

	pthread_mutex_lock(&preload_lock);
	if (error == 0) {
		preload_maps[slot].addr = (uintptr_t)addr;
		preload_maps[slot].len = len;
		preload_maps[slot].page = page;
		preload_maps[slot].state = PRELOAD_REGISTERED;
	} else {
		preload_maps[slot].state = PRELOAD_FREE;
		__atomic_sub_fetch(&preload_used, 1, __ATOMIC_RELAXED);
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
			    runflags_text(preload_flags, fl, sizeof(fl)));
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
 * page) is kept: the call fails with EINVAL and changes nothing.
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

			if (m->state != PRELOAD_REGISTERED || end <= m->addr ||
			    start >= m->addr + m->len)
				continue;
			if ((start > m->addr && start % m->page != 0) ||
			    (end < m->addr + m->len && end % m->page != 0))
				continue;
			gone = *m;
			m->state = PRELOAD_FREE;
			__atomic_sub_fetch(&preload_used, 1, __ATOMIC_RELAXED);
			break;
		}
		pthread_mutex_unlock(&preload_lock);
		if (i == PRELOAD_SLOTS)
			return;

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

static int	preload_pool_map(void *, size_t, int, off64_t);
static void	preload_pool_forget(int);

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
	if ((flags & MAP_FIXED) != 0)
		preload_release(addr, len);
	/* A memfd mapped before it is sized keeps its own file. */
	if (fd >= 0 &&
	    __atomic_load_n(&preload_ncandidates, __ATOMIC_RELAXED) != 0)
		preload_pool_forget(fd);
	errno = saved;
	p = preload_real_mmap(addr, len, prot, flags, fd, off, is64);
	if (p != MAP_FAILED &&
	    (page = preload_wants(len, prot, flags, fd, off, caller)) != 0) {
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
	if ((pfd = hpz_pool_take(0, mine.page, mine.name, &ready)) < 0) {
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

/*
 * A mapping of a pool file: its pages are allocated and zero, so there is
 * nothing for hpzerod to do on them unless the flags ask for work (premap,
 * allocation ahead of the rest, discard); registering would only put a
 * round trip on each first touch.  With premap its pages are mapped here
 * at once.  1 if the mapping is to be left to the kernel.
 */
static int
preload_pool_map(void *addr, size_t len, int fd, off64_t off)
{
	struct preload_memfd	*m;
	size_t			 ready = 0, n;
	char			 sz[32], sz2[32];
	int			 pool;

	pthread_mutex_lock(&preload_lock);
	if ((pool = (m = preload_memfd_find(fd, 2)) != NULL))
		ready = m->ready;
	pthread_mutex_unlock(&preload_lock);
	if (!pool)
		return (0);
	n = (size_t)off < ready ? ready - (size_t)off : 0;
	if (n > len)
		n = len;
	if ((preload_flags & HPZ_PREMAP) && n > 0)
		(void)madvise(addr, n, MADV_POPULATE_WRITE);
	if ((preload_flags & (HPZ_PREMAP | HPZ_AHEAD_EAGER |
	    HPZ_AHEAD_ONFAULT | HPZ_DISCARD)) != 0)
		return (0);
	if (preload_verbose)
		preload_say("hpz-run: [%d] %s at %p is a pool file: left to "
		    "the kernel (%s of it allocated and zero)", (int)getpid(),
		    preload_size_text(len, sz, sizeof(sz)), addr,
		    preload_size_text(n, sz2, sizeof(sz2)));
	return (1);
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
