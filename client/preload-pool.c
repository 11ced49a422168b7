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
 * A mapping of a pool file is premapped, not registered.  What the
 * program sees must stay what its own memfd would show it: a page it
 * punches (fallocate) is never premapped or read ahead again, a size it
 * cuts is not premapped again, and before its own userfaultfd registers
 * MISSING or MINOR on a pool file's mapping the pages hpz-run put there
 * and the program never wrote (zero) are punched, so that its faults come
 * as on its own memfd (issue 32).  The interposers: memfd_create,
 * ftruncate, ftruncate64, fallocate, fallocate64.
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
#define PRELOAD_POOL_MAPS		16
#define PRELOAD_POOL_SCAN		(2UL << 20)	/* read a page by */

struct preload_pool_memfd {
	int		 state;		/* 0 free, 1 a candidate, 2 a pool file */
	int		 fd;
	dev_t		 dev;		/* the file fd is, to know it again */
	ino_t		 ino;
	unsigned int	 flags;		/* the program's memfd_create flags */
	unsigned int	 page;		/* HPZ_PAGE_2M or HPZ_PAGE_1G */
	size_t		 ready;		/* pool file: bytes allocated, zero */
	unsigned char	*holes;		/* pool file: pages of ready punched */
	int		 punched;	/* pool file: no read-ahead any more */
	char		 name[64];
};

/* A mapping of a pool file, for the program's own userfaultfd. */
struct preload_pool_mapping {
	int		 used;
	uintptr_t	 addr;
	size_t		 len;
	off64_t		 off;
	size_t		 page;
	int		 fd;		/* our copy of the file */
	dev_t		 dev;
	ino_t		 ino;
};

static struct preload_pool_memfd preload_pool_memfds[PRELOAD_POOL_MEMFDS];
static struct preload_pool_mapping preload_pool_maps[PRELOAD_POOL_MAPS];
static int	preload_pool_candidates;	/* memfds not sized yet */
static int	preload_pool_files;		/* pool files in the table */
int		preload_pool_mapped;		/* mappings of them recorded */
/* Held by a read-ahead around each page, and to stop them all. */
static pthread_mutex_t preload_pool_ahead_lock = PTHREAD_MUTEX_INITIALIZER;

static int	preload_pool_page(unsigned int);
static struct preload_pool_memfd *preload_pool_find(int, int);
static void	preload_pool_swap(int, off64_t);
static int	preload_pool_ftruncate(int, off64_t, int, const void *);
static void	*preload_pool_ahead_main(void *);
static void	preload_pool_ahead(char *, char *, size_t);
static void	preload_pool_ahead_stop(void);
static void	preload_pool_holes(struct preload_pool_memfd *, off64_t,
		    off64_t);
static void	preload_pool_premap(char *, size_t, off64_t, size_t,
		    const unsigned char *);
static int	preload_pool_fallocate(int, int, off64_t, off64_t, int);
static int	preload_pool_zero(int, off64_t, size_t, unsigned char *);

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
			m->holes = NULL;
			m->punched = 0;
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
	unsigned char		*holes;
	size_t			 ready = 0, page;
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
		preload_real_close(pfd);
		return;
	}
	preload_real_close(pfd);
	/* A memfd made without MFD_ALLOW_SEALING takes no seals. */
	if ((mine.flags & MFD_ALLOW_SEALING) == 0)
		(void)fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL);
	if (fstat(fd, &st) == -1)
		return;
	/* A bit a page of what is ready: the pages the program punches. */
	page = mine.page == HPZ_PAGE_1G ? 1UL << 30 : 2UL << 20;
	holes = calloc(ready / page / 8 + 1, 1);
	pthread_mutex_lock(&preload_lock);
	/* Room for it, else the oldest record goes. */
	for (m = &preload_pool_memfds[0]; m < &preload_pool_memfds[PRELOAD_POOL_MEMFDS]; m++)
		if (m->state == 0)
			break;
	if (m == &preload_pool_memfds[PRELOAD_POOL_MEMFDS]) {
		m = &preload_pool_memfds[0];
		free(m->holes);
		if (m->state == 1)
			__atomic_sub_fetch(&preload_pool_candidates, 1,
			    __ATOMIC_RELAXED);
		if (m->state == 2)
			__atomic_sub_fetch(&preload_pool_files, 1,
			    __ATOMIC_RELAXED);
	}
	*m = mine;
	m->state = 2;
	m->dev = st.st_dev;
	m->ino = st.st_ino;
	/* No room to note a punch: nothing is premapped. */
	m->ready = holes != NULL ? ready : 0;
	m->holes = holes;
	m->punched = 0;
	__atomic_add_fetch(&preload_pool_files, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&preload_lock);
	if (preload_verbose)
		preload_say("hpz-run: [%d] memfd '%s' (fd %d): a pool file, "
		    "%s allocated and zero", (int)getpid(), mine.name, fd,
		    preload_size_text(ready, sz, sizeof(sz)));
}

static int
preload_pool_ftruncate(int fd, off64_t len, int is64, const void *caller)
{
	struct preload_pool_memfd	*m;
	size_t			 page;
	int			 rc, saved = errno;

	if (__atomic_load_n(&preload_pool_candidates, __ATOMIC_RELAXED) != 0 &&
	    preload_ready() && !preload_from_libhpz(caller)) {
		preload_busy++;
		preload_pool_swap(fd, len);
		preload_busy--;
		errno = saved;
	}
	/* A pool file cut short: what comes back on growing is holes. */
	if (__atomic_load_n(&preload_pool_files, __ATOMIC_RELAXED) != 0 &&
	    len >= 0 && preload_ready()) {
		preload_busy++;
		pthread_mutex_lock(&preload_lock);
		if ((m = preload_pool_find(fd, 2)) != NULL) {
			page = m->page == HPZ_PAGE_1G ? 1UL << 30 : 2UL << 20;
			if ((size_t)len / page * page < m->ready) {
				m->ready = (size_t)len / page * page;
				m->punched = 1;
				preload_pool_ahead_stop();
			}
		}
		pthread_mutex_unlock(&preload_lock);
		preload_busy--;
		errno = saved;
	}
	if (is64 && real_ftruncate64 != NULL)
		rc = real_ftruncate64(fd, len);
	else if (!is64 && real_ftruncate != NULL)
		rc = real_ftruncate(fd, (off_t)len);
	else
		rc = (int)syscall(SYS_ftruncate, fd, len);
	return (rc);
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

/* Pages [off, off+len) of a pool file are punched (preload_lock held). */
static void
preload_pool_holes(struct preload_pool_memfd *m, off64_t off, off64_t len)
{
	size_t	page = m->page == HPZ_PAGE_1G ? 1UL << 30 : 2UL << 20;
	size_t	first, last, i;

	if (m->holes == NULL || off < 0 || len <= 0)
		return;
	/* Only whole pages go: a part of one is zeroed, the page stays. */
	first = ((size_t)off + page - 1) / page;
	last = (size_t)off + (size_t)len < (size_t)off ? SIZE_MAX / page :
	    ((size_t)off + (size_t)len) / page;
	for (i = first; i < last && i < m->ready / page; i++)
		m->holes[i / 8] |= (unsigned char)(1U << (i % 8));
}

/*
 * A punch of a pool file: noted, so that no premap allocates those pages
 * again, and every read-ahead stops first (one may be about to populate
 * them); what is punched stays a hole until the program touches it.
 */
static int
preload_pool_fallocate(int fd, int mode, off64_t off, off64_t len, int is64)
{
	struct preload_pool_memfd	*m;
	int			 rc, pool = 0, saved = errno;

	if ((mode & FALLOC_FL_PUNCH_HOLE) != 0 &&
	    __atomic_load_n(&preload_pool_files, __ATOMIC_RELAXED) != 0 &&
	    preload_ready()) {
		preload_busy++;
		pthread_mutex_lock(&preload_lock);
		pool = preload_pool_find(fd, 2) != NULL;
		pthread_mutex_unlock(&preload_lock);
		if (pool)
			preload_pool_ahead_stop();
		preload_busy--;
		errno = saved;
	}
	preload_resolve_once();
	if (is64 && real_fallocate64 != NULL)
		rc = real_fallocate64(fd, mode, off, len);
	else if (!is64 && real_fallocate != NULL)
		rc = real_fallocate(fd, mode, (off_t)off, (off_t)len);
	else
		rc = (int)syscall(SYS_fallocate, fd, mode, off, len);
	if (rc == 0 && pool) {
		saved = errno;
		preload_busy++;
		pthread_mutex_lock(&preload_lock);
		if ((m = preload_pool_find(fd, 2)) != NULL) {
			preload_pool_holes(m, off, len);
			m->punched = 1;
		}
		pthread_mutex_unlock(&preload_lock);
		preload_busy--;
		errno = saved;
	}
	return (rc);
}

int
fallocate(int fd, int mode, off_t off, off_t len)
{
	return (preload_pool_fallocate(fd, mode, (off64_t)off, (off64_t)len,
	    0));
}

int
fallocate64(int fd, int mode, off64_t off, off64_t len)
{
	return (preload_pool_fallocate(fd, mode, off, len, 1));
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
	int			 stop;

	free(arg);
	memset(&sp, 0, sizeof(sp));
	(void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
	for (p = a.hi; p > a.lo; p -= a.page) {
		/* Under the lock: a stop waits for the page in flight. */
		pthread_mutex_lock(&preload_pool_ahead_lock);
		stop = __atomic_load_n(&preload_map_gen, __ATOMIC_RELAXED) !=
		    a.gen || madvise(p - a.page, a.page, MADV_POPULATE_READ) !=
		    0;
		pthread_mutex_unlock(&preload_pool_ahead_lock);
		if (stop)
			break;
	}
	return (NULL);
}

/*
 * Every read-ahead stops, and none is populating a page once this returns
 * (a punch or the program's own uffd comes next).
 */
static void
preload_pool_ahead_stop(void)
{
	pthread_mutex_lock(&preload_pool_ahead_lock);
	__atomic_add_fetch(&preload_map_gen, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&preload_pool_ahead_lock);
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
 * Premap [addr, addr+n) of a mapping at file offset off: every page but
 * those punched (holes, a bit a page of the file, NULL: none).
 */
static void
preload_pool_premap(char *addr, size_t n, off64_t off, size_t page,
    const unsigned char *holes)
{
	size_t	i, run = 0, first = (size_t)off / page;

	for (i = 0; i <= n / page; i++) {
		if (i < n / page && (holes == NULL || (holes[(first + i) / 8] &
		    (1U << ((first + i) % 8))) == 0)) {
			run++;
			continue;
		}
		if (run > 0)
			(void)madvise(addr + (i - run) * page, run * page,
			    MADV_POPULATE_WRITE);
		run = 0;
	}
}

/* Note a mapping of a pool file: its copy of the file, for undo. */
static void
preload_pool_note(void *addr, size_t len, int fd, off64_t off, size_t page,
    dev_t dev, ino_t ino)
{
	struct preload_pool_mapping	*pm;
	int				 i, copy;

	if ((copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)
		return;
	pthread_mutex_lock(&preload_lock);
	for (i = 0; i < PRELOAD_POOL_MAPS; i++)
		if (!preload_pool_maps[i].used)
			break;
	if (i < PRELOAD_POOL_MAPS) {
		pm = &preload_pool_maps[i];
		pm->used = 1;
		pm->addr = (uintptr_t)addr;
		pm->len = len;
		pm->off = off;
		pm->page = page;
		pm->fd = copy;
		pm->dev = dev;
		pm->ino = ino;
		copy = -1;
		__atomic_add_fetch(&preload_pool_mapped, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&preload_lock);
	if (copy >= 0) {
		preload_real_close(copy);
		if (preload_verbose)
			preload_say("hpz-run: [%d] %d pool file mappings noted "
			    "already: %p is not; the program's own uffd will not "
			    "see MISSING faults there", (int)getpid(),
			    PRELOAD_POOL_MAPS, addr);
	}
}

/* [addr, addr+len) is unmapped, moved or mapped over: its notes go. */
void
preload_pool_unmap(const void *addr, size_t len)
{
	struct preload_pool_mapping	*pm;
	uintptr_t			 start = (uintptr_t)addr, end;
	int				 i;

	if (len == 0 ||
	    __atomic_load_n(&preload_pool_mapped, __ATOMIC_RELAXED) == 0)
		return;
	end = start + len < start ? UINTPTR_MAX : start + len;
	pthread_mutex_lock(&preload_lock);
	for (i = 0; i < PRELOAD_POOL_MAPS; i++) {
		pm = &preload_pool_maps[i];
		if (!pm->used || end <= pm->addr || start >= pm->addr + pm->len)
			continue;
		preload_real_close(pm->fd);
		memset(pm, 0, sizeof(*pm));
		__atomic_sub_fetch(&preload_pool_mapped, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&preload_lock);
}

/* Is the page of fd at off all zero?  1 yes, 0 no, -1 cannot read. */
static int
preload_pool_zero(int fd, off64_t off, size_t page, unsigned char *buf)
{
	size_t	done, i;
	ssize_t	n;

	/* hugetlbfs reads a hole as zeros and allocates nothing. */
	for (done = 0; done < page; done += (size_t)n) {
		n = pread64(fd, buf, PRELOAD_POOL_SCAN < page - done ?
		    PRELOAD_POOL_SCAN : page - done, off + (off64_t)done);
		if (n <= 0)
			return (n == 0 ? 1 : -1);	/* past EOF: nothing */
		for (i = 0; i < (size_t)n; i += sizeof(uint64_t))
			if (*(const uint64_t *)(buf + i) != 0)
				return (0);
	}
	return (1);
}

/*
 * The program's own userfaultfd is about to register MISSING or MINOR on
 * [start, end).  Where that covers a pool file, the pages hpz-run put
 * there and the program never wrote are punched first: on its own memfd
 * they would be holes, and would fault.  A page that holds anything else
 * is the program's data and stays.  A page it wrote zeros to cannot be
 * told from one it never wrote: it is punched too, and reads zero again
 * (or faults, as a hole of its own memfd would).  How many went.
 */
int
preload_pool_unfill(uintptr_t start, uintptr_t end)
{
	struct preload_pool_mapping	 pm;
	struct preload_pool_memfd	*m;
	unsigned char			*buf = NULL;
	uintptr_t			 lo, hi, a;
	off64_t				 off;
	char				 sz[32];
	int				 i, z, punched = 0, kept = 0, error = 0;

	if (__atomic_load_n(&preload_pool_mapped, __ATOMIC_RELAXED) == 0)
		return (0);
	for (i = 0; i < PRELOAD_POOL_MAPS; i++) {
		pthread_mutex_lock(&preload_lock);
		pm = preload_pool_maps[i];
		if (!pm.used || end <= pm.addr || start >= pm.addr + pm.len ||
		    (pm.fd = fcntl(pm.fd, F_DUPFD_CLOEXEC, 0)) < 0) {
			pthread_mutex_unlock(&preload_lock);
			continue;
		}
		pthread_mutex_unlock(&preload_lock);
		/* No read-ahead may allocate a page behind us. */
		preload_pool_ahead_stop();
		if (buf == NULL && (buf = malloc(PRELOAD_POOL_SCAN)) == NULL) {
			preload_real_close(pm.fd);
			break;
		}
		lo = start > pm.addr ? start : pm.addr;
		hi = end < pm.addr + pm.len ? end : pm.addr + pm.len;
		/* Whole pages only: the kernel refuses a register on less. */
		lo = (lo - pm.addr + pm.page - 1) / pm.page * pm.page + pm.addr;
		hi = (hi - pm.addr) / pm.page * pm.page + pm.addr;
		for (a = lo; a < hi; a += pm.page) {
			off = pm.off + (off64_t)(a - pm.addr);
			if ((z = preload_pool_zero(pm.fd, off, pm.page,
			    buf)) != 1) {
				kept += z == 0;
				continue;
			}
			if (syscall(SYS_fallocate, pm.fd, FALLOC_FL_PUNCH_HOLE |
			    FALLOC_FL_KEEP_SIZE, off, (off64_t)pm.page) != 0) {
				error = errno;
				continue;
			}
			punched++;
			pthread_mutex_lock(&preload_lock);
			if ((m = preload_pool_find(pm.fd, 2)) != NULL) {
				preload_pool_holes(m, off, (off64_t)pm.page);
				m->punched = 1;
			}
			pthread_mutex_unlock(&preload_lock);
		}
		preload_real_close(pm.fd);
		if (preload_verbose)
			preload_say("hpz-run: [%d] the program's userfaultfd on "
			    "the pool file at %p: %d pages it never wrote "
			    "punched, %d of its data kept (%s pages)",
			    (int)getpid(), (void *)pm.addr, punched, kept,
			    preload_size_text(pm.page, sz, sizeof(sz)));
		if (error != 0)
			preload_say("hpz-run: [%d] cannot punch the pool file "
			    "at %p for the program's userfaultfd: %s; its "
			    "zero pages raise no MISSING fault", (int)getpid(),
			    (void *)pm.addr, strerror(error));
	}
	free(buf);
	return (punched);
}

/*
 * A mapping of a pool file: its pages are allocated and zero, so there is
 * nothing for hpzerod to do on them unless the flags ask for work
 * (allocation ahead of the rest, discard); registering would only put a
 * round trip on each first touch.  Its pages are mapped here at once
 * (unless nopremap), but for those the program punched.  1 if the mapping
 * is to be left to the kernel.
 */
int
preload_pool_map(void *addr, size_t len, int fd, off64_t off)
{
	struct preload_pool_memfd	*m;
	size_t			 ready = 0, n, page = 0, first, i;
	unsigned char		*holes = NULL;
	dev_t			 dev = 0;
	ino_t			 ino = 0;
	char			 sz[32], sz2[32];
	int			 pool, punched = 0;

	pthread_mutex_lock(&preload_lock);
	if ((pool = (m = preload_pool_find(fd, 2)) != NULL)) {
		ready = m->ready;
		page = m->page == HPZ_PAGE_1G ? 1UL << 30 : 2UL << 20;
		dev = m->dev;
		ino = m->ino;
		punched = m->punched;
		/* The punched pages of ready, bit for bit. */
		if (ready > 0 && (holes = malloc(ready / page / 8 + 1)) != NULL)
			memcpy(holes, m->holes, ready / page / 8 + 1);
		else
			ready = 0;
	}
	pthread_mutex_unlock(&preload_lock);
	if (!pool)
		return (0);
	preload_pool_note(addr, len, fd, off, page, dev, ino);
	n = (size_t)off < ready ? ready - (size_t)off : 0;
	if (n > len)
		n = len;
	/* Premapping is the default: 0.5 us a page, against a touch's 15. */
	if ((preload_flags & HPZ_NO_PREMAP) == 0 && n > 0)
		preload_pool_premap(addr, n, off, page, holes);
	/* Punched pages are not allocated and zero. */
	first = (size_t)off / page;
	for (i = 0; holes != NULL && i < n / page; i++)
		if (holes[(first + i) / 8] & (1U << ((first + i) % 8)))
			n -= page;
	free(holes);
	if ((preload_flags & (HPZ_AHEAD_EAGER | HPZ_AHEAD_ONFAULT |
	    HPZ_DISCARD)) != 0)
		return (0);
	/*
	 * More than the pool had: the rest ahead, on idle cores; never on a
	 * file the program punched (its holes stay holes).
	 */
	if ((preload_flags & HPZ_NO_PREMAP) == 0 && !punched &&
	    (size_t)off + len > ready &&
	    page > 0 && len % page == 0)
		preload_pool_ahead((char *)addr + ((size_t)off < ready ?
		    ready - (size_t)off : 0), (char *)addr + len, page);
	if (preload_verbose)
		preload_say("hpz-run: [%d] %s at %p is a pool file: left to "
		    "the kernel (%s of it allocated and zero)", (int)getpid(),
		    preload_size_text(len, sz, sizeof(sz)), addr,
		    preload_size_text(n, sz2, sizeof(sz2)));
	return (1);
}
