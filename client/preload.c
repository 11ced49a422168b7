/*
 * preload.c - libhpz-preload.so, the LD_PRELOAD half of hpz-run: a program's
 * large writable MAP_SHARED mappings of hugetlbfs or shmem files are
 * registered with hpzerod as they are made, and unregistered before they
 * are unmapped, moved or mapped over.  Everything else passes untouched,
 * and a failure only ever costs the program hpzerod's help, never a
 * different mmap result or errno.
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
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include "hpz.h"
#include "runflags.h"
#include "size.h"

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
	errno = saved;
	p = preload_real_mmap(addr, len, prot, flags, fd, off, is64);
	if (p != MAP_FAILED &&
	    (page = preload_wants(len, prot, flags, fd, off, caller)) != 0) {
		saved = errno;
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
