/*
 * preload.c - libhpz-preload.so, the LD_PRELOAD half of hpz-run: a program's
 * large writable MAP_SHARED mappings of hugetlbfs or shmem files are
 * registered with hpzerod as they are made, and unregistered before they
 * are unmapped, moved or mapped over.  Everything else passes untouched,
 * and a failure only ever costs the program hpzerod's help, never a
 * different result or errno.
 *
 * This file: the interposers of the mappings (mmap, mmap64, munmap,
 * mremap) and of hpz_register, which register and release.  Under it,
 * preload-base.c holds the settings, the next definitions in line
 * (dlsym) and the table of mappings registered.  preload-uffd.c hands a
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

/* Warned once that hpzerod cannot help this process. */
static int			 preload_warned;

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
