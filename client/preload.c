/*
 * preload.c - libhpz-preload.so, the LD_PRELOAD half of hpz-run: a program's
 * large writable MAP_SHARED mappings of hugetlbfs or shmem files are
 * registered with hpzerod as they are made, and unregistered before they
 * are unmapped, moved or mapped over.  Everything else passes untouched,
 * and a failure only ever costs the program hpzerod's help, never a
 * different result or errno.
 *
 * This file: the settings, the next definitions in line (dlsym), the table
 * of mappings registered, and the interposers of the mappings (mmap,
 * mmap64, munmap, mremap) and of hpz_register.  preload-uffd.c hands a
 * range over to the program's own userfaultfd and takes it back (ioctl,
 * close) and drops garbage before a file leaves the process (sendmsg);
 * preload-pool.c swaps a pool file in for a hugetlb memfd the program
 * makes and keeps it looking like the program's own (memfd_create,
 * ftruncate, ftruncate64, fallocate, fallocate64).
 */
#if defined(_FILE_OFFSET_BITS) && _FILE_OFFSET_BITS == 64
#undef _FILE_OFFSET_BITS	/* we define both mmap and mmap64 */
#endif

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include "hpz.h"
#include "mappers.h"
#include "runflags.h"
#include "runselect.h"
#include "size.h"
#include "uffd-compat.h"
#include "preload.h"

#define PRELOAD_MIN_DEFAULT	(64UL << 20)

/* The definitions ours hide, found with dlsym(RTLD_NEXT). */
static void	*(*real_mmap)(void *, size_t, int, int, int, off_t);
static void	*(*real_mmap64)(void *, size_t, int, int, int, off64_t);
static int	 (*real_munmap)(void *, size_t);
static void	*(*real_mremap)(void *, size_t, size_t, int, ...);
static int	 (*real_ioctl)(int, unsigned long, ...);
static int	 (*real_close)(int);
ssize_t		 (*real_sendmsg)(int, const struct msghdr *, int);
int		 (*real_register)(const struct hpz_region *);
int		 (*real_memfd_create)(const char *, unsigned int);
int		 (*real_ftruncate)(int, off_t);
int		 (*real_ftruncate64)(int, off64_t);
int		 (*real_fallocate)(int, int, off_t, off_t);
int		 (*real_fallocate64)(int, int, off64_t, off64_t);

static pthread_once_t		 preload_once = PTHREAD_ONCE_INIT;
pthread_mutex_t			 preload_lock = PTHREAD_MUTEX_INITIALIZER;
struct preload_map		 preload_maps[PRELOAD_SLOTS];
int				 preload_used;
int				 preload_handed;
int				 preload_discards;
size_t				 preload_min = PRELOAD_MIN_DEFAULT;
unsigned int			 preload_flags;
static struct runselect		 preload_select;
int				 preload_verbose;
int				 preload_off;
static int			 preload_warned;
static int			 preload_started;	/* constructor done */
static void			*preload_libhpz;	/* base of libhpz.so */
int				 preload_nopool;
unsigned long			 preload_map_gen;
__thread int			 preload_busy;

/* One line to stderr, without stdio (we may be called from anywhere). */
void
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
const char *
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
	real_fallocate = (__typeof__(real_fallocate))dlsym(RTLD_NEXT,
	    "fallocate");
	real_fallocate64 = (__typeof__(real_fallocate64))dlsym(RTLD_NEXT,
	    "fallocate64");
	if (real_register != NULL && dladdr((void *)real_register, &info) != 0)
		preload_libhpz = info.dli_fbase;
	preload_busy--;
}

/* preload_resolve, once. */
void
preload_resolve_once(void)
{
	pthread_once(&preload_once, preload_resolve);
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
	preload_resolve_once();
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

int
preload_real_ioctl(int fd, unsigned long req, void *arg)
{
	if (real_ioctl != NULL)
		return (real_ioctl(fd, req, arg));
	return ((int)syscall(SYS_ioctl, fd, req, arg));
}

int
preload_real_close(int fd)
{
	if (real_close != NULL)
		return (real_close(fd));
	return ((int)syscall(SYS_close, fd));
}

/* Whether this call may do our work: not a nested one, not too early. */
int
preload_ready(void)
{
	if (preload_busy)
		return (0);
	preload_resolve_once();
	return (__atomic_load_n(&preload_started, __ATOMIC_ACQUIRE));
}

/* Was this call made from inside libhpz (its own uffds, its own maps)? */
int
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
void
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
void
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
		preload_pool_unmap(addr, len);
	}
	/* A memfd mapped before it is sized keeps its own file. */
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
		preload_pool_unmap(addr, len);
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
		preload_pool_unmap(old, old_len);
		if ((flags & MREMAP_FIXED) != 0) {
			preload_release(new_addr, new_len);
			preload_pool_unmap(new_addr, new_len);
		}
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

	preload_resolve_once();
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
