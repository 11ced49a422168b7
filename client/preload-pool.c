/*
 * preload-pool.c - a pool file for the program's hugetlb memfd: one the
 * program makes and sizes (memfd_create, then ftruncate: QEMU's
 * memory-backend-memfd) becomes a file of hpzerod's pre-zeroed pool.
 *
 * memfd_create gives the program a memfd of its own at once (a probe such
 * as QEMU's qemu_memfd_check closes it again, and must not cost the pool a
 * file); its first ftruncate, which says how much memory it wants, swaps
 * a pool file in under the same fd number.  The memfd's name is set when
 * it is made, so the file keeps the pool's ("hpz-pool"); the name the
 * program asked for is sent along for the daemon's log.
 *
 * A mapping of a pool file is premapped, not registered.  The
 * interposers: memfd_create, ftruncate, ftruncate64.
 */
#if defined(_FILE_OFFSET_BITS) && _FILE_OFFSET_BITS == 64
#undef _FILE_OFFSET_BITS	/* as preload.c: off_t and off64_t both */
#endif

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/memfd.h>

#include "hpz.h"
#include "uffd-compat.h"
#include "preload.h"

#define PRELOAD_POOL_MEMFDS		16

struct preload_pool_memfd {
	int		 state;		/* 0 free, 1 a candidate, 2 a pool file */
	int		 fd;
	dev_t		 dev;		/* the file fd is, to know it again */
	ino_t		 ino;
	unsigned int	 flags;		/* the program's memfd_create flags */
	unsigned int	 page;		/* HPZ_PAGE_2M or HPZ_PAGE_1G */
	size_t		 ready;		/* pool file: bytes allocated, zero */
	char		 name[64];
};

static struct preload_pool_memfd preload_pool_memfds[PRELOAD_POOL_MEMFDS];
static int	preload_pool_candidates;	/* memfds not sized yet */

static int	preload_pool_page(unsigned int);
static struct preload_pool_memfd *preload_pool_find(int, int);
static void	preload_pool_swap(int, off64_t);
static int	preload_pool_ftruncate(int, off64_t, int, const void *);
static void	*preload_pool_ahead_main(void *);
static void	preload_pool_ahead(char *, char *, size_t);

/* HPZ_PAGE_* of a memfd_create(MFD_HUGETLB) size, or -1. */
static int
preload_pool_page(unsigned int flags)
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
static struct preload_pool_memfd *
preload_pool_find(int fd, int state)
{
	struct preload_pool_memfd	*m;
	struct stat		 st;
	int			 i;

	if (fstat(fd, &st) == -1)
		return (NULL);
	for (i = 0; i < PRELOAD_POOL_MEMFDS; i++) {
		m = &preload_pool_memfds[i];
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
	struct preload_pool_memfd	*m;
	struct stat		 st;
	int			 fd, page, i, saved;

	preload_resolve_once();
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
	if ((page = preload_pool_page(flags)) >= 0 && fstat(fd, &st) == 0 &&
	    !preload_from_libhpz(__builtin_return_address(0))) {
		pthread_mutex_lock(&preload_lock);
		for (i = 0; i < PRELOAD_POOL_MEMFDS; i++)
			if (preload_pool_memfds[i].state == 0)
				break;
		if (i < PRELOAD_POOL_MEMFDS) {
			m = &preload_pool_memfds[i];
			m->state = 1;
			m->fd = fd;
			m->dev = st.st_dev;
			m->ino = st.st_ino;
			m->flags = flags;
			m->page = (unsigned int)page;
			m->ready = 0;
			snprintf(m->name, sizeof(m->name), "%s",
			    name != NULL ? name : "");
			__atomic_add_fetch(&preload_pool_candidates, 1,
			    __ATOMIC_RELAXED);
		}
		pthread_mutex_unlock(&preload_lock);
	}
	preload_busy--;
	errno = saved;
	return (fd);
}

/* fd is mapped (or used) as it is: it must stay the program's own file. */
void
preload_pool_forget(int fd)
{
	struct preload_pool_memfd	*m;

	if (fd < 0 ||
	    __atomic_load_n(&preload_pool_candidates, __ATOMIC_RELAXED) == 0)
		return;
	pthread_mutex_lock(&preload_lock);
	if ((m = preload_pool_find(fd, 1)) != NULL) {
		m->state = 0;
		__atomic_sub_fetch(&preload_pool_candidates, 1, __ATOMIC_RELAXED);
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
	struct preload_pool_memfd	*m, mine;
	struct stat		 st;
	char			 sz[32];
	size_t			 ready = 0;
	int			 pfd, seals;

	pthread_mutex_lock(&preload_lock);
	if ((m = preload_pool_find(fd, 1)) == NULL) {
		pthread_mutex_unlock(&preload_lock);
		return;
	}
	mine = *m;
	m->state = 0;	/* sized once: a candidate no more */
	__atomic_sub_fetch(&preload_pool_candidates, 1, __ATOMIC_RELAXED);
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
	for (m = &preload_pool_memfds[0]; m < &preload_pool_memfds[PRELOAD_POOL_MEMFDS]; m++)
		if (m->state == 0)
			break;
	if (m == &preload_pool_memfds[PRELOAD_POOL_MEMFDS])
		m = &preload_pool_memfds[0];
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
preload_pool_ftruncate(int fd, off64_t len, int is64, const void *caller)
{
	int	saved = errno;

	if (__atomic_load_n(&preload_pool_candidates, __ATOMIC_RELAXED) != 0 &&
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
	return (preload_pool_ftruncate(fd, (off64_t)len, 0,
	    __builtin_return_address(0)));
}

int
ftruncate64(int fd, off64_t len)
{
	return (preload_pool_ftruncate(fd, len, 1, __builtin_return_address(0)));
}

/* The rest of a pool file's mapping, populated from its end (a thread). */
struct preload_pool_ahead {
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
preload_pool_ahead_main(void *arg)
{
	struct preload_pool_ahead	a = *(struct preload_pool_ahead *)arg;
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
preload_pool_ahead(char *lo, char *hi, size_t page)
{
	struct preload_pool_ahead	*a;
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
	if (pthread_create(&t, &at, preload_pool_ahead_main, a) != 0)
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
int
preload_pool_map(void *addr, size_t len, int fd, off64_t off)
{
	struct preload_pool_memfd	*m;
	size_t			 ready = 0, n, page = 0;
	char			 sz[32], sz2[32];
	int			 pool;

	pthread_mutex_lock(&preload_lock);
	if ((pool = (m = preload_pool_find(fd, 2)) != NULL)) {
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
		preload_pool_ahead((char *)addr + n, (char *)addr + len, page);
	if (preload_verbose)
		preload_say("hpz-run: [%d] %s at %p is a pool file: left to "
		    "the kernel (%s of it allocated and zero)", (int)getpid(),
		    preload_size_text(len, sz, sizeof(sz)), addr,
		    preload_size_text(n, sz2, sizeof(sz2)));
	return (1);
}
