/*
 * preload-base.c - what every file of libhpz-preload.so stands on: the
 * settings (HPZ_RUN_*), the next definitions in line (dlsym) and the
 * system calls while they are not known, the table of mappings registered
 * and its slots, the one-line messages.  Under preload.c, preload-uffd.c
 * and preload-pool.c; calls none of them.
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
#include <sys/socket.h>
#include <sys/syscall.h>

#include "hpz.h"
#include "runflags.h"
#include "runselect.h"
#include "size.h"
#include "preload.h"

#define PRELOAD_MIN_DEFAULT	(64UL << 20)

/* The definitions ours hide, found with dlsym(RTLD_NEXT). */
static void	*(*real_mmap)(void *, size_t, int, int, int, off_t);
static void	*(*real_mmap64)(void *, size_t, int, int, int, off64_t);
static int	 (*real_munmap)(void *, size_t);
void		*(*real_mremap)(void *, size_t, size_t, int, ...);
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
struct runselect		 preload_select;
int				 preload_verbose;
int				 preload_off;
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
void *
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

int
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
