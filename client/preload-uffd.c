/*
 * preload-uffd.c - a range has one userfaultfd.  When the program registers
 * a uffd of its own on one of ours (QEMU's postcopy and background
 * snapshot, and their probes), ours is handed over first: hpz_unregister,
 * which drops the garbage from the file, then the program's ioctl; when
 * the program lets go of the range (UFFDIO_UNREGISTER, or close of that
 * uffd) we register it again, without HPZ_DISCARD.  A MISSING or MINOR
 * register on a pool file's mapping has the zero pages hpz-run put there
 * punched first (preload-pool.c).  Before the program
 * passes the file of a region that may still hold garbage to another
 * process (SCM_RIGHTS), the garbage is dropped the same way: only our
 * uffd guards it.  The interposers: ioctl, close, sendmsg.
 */
#if defined(_FILE_OFFSET_BITS) && _FILE_OFFSET_BITS == 64
#undef _FILE_OFFSET_BITS	/* as preload.c: off_t and off64_t both */
#endif

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <linux/userfaultfd.h>

#include "hpz.h"
#include "uffd-compat.h"
#include "preload.h"

static int	preload_uffd_hand_over(int, uintptr_t, uintptr_t);
static void	preload_uffd_take_back(int, uintptr_t, uintptr_t);
static void	preload_uffd_settle(int);
static int	preload_uffd_peek(const void *, size_t,
		    struct uffdio_register *);

/*
 * The program is about to register its own uffd on [start, end): every
 * region of ours there is unregistered first.  hpzerod drops its garbage
 * from the file (holes read zero) and lets go of the range, so the
 * program's uffd sees only data and holes.  How many went.
 */
static int
preload_uffd_hand_over(int uffd, uintptr_t start, uintptr_t end)
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

		/* Holes where garbage is, not zeros: its uffd serves them. */
		(void)hpz_set_policy(&r, r.flags | HPZ_RELEASE_HOLES,
		    HPZ_PRIO_DEFAULT);
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
preload_uffd_take_back(int closed, uintptr_t start, uintptr_t end)
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
preload_uffd_settle(int fd)
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

/*
 * The first len bytes of a UFFDIO_REGISTER or UNREGISTER argument (both
 * begin with the range; a register goes on with its mode), read the way
 * the kernel will: a bad pointer is the kernel's EFAULT to give, not a
 * crash of ours.  0, or -1 if it cannot be read.
 */
static int
preload_uffd_peek(const void *arg, size_t len, struct uffdio_register *reg)
{
	struct iovec	local, remote;

	memset(reg, 0, sizeof(*reg));
	local.iov_base = reg;
	local.iov_len = len;
	remote.iov_base = (void *)(uintptr_t)arg;
	remote.iov_len = len;
	if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) ==
	    (ssize_t)len)
		return (0);
	if (errno == EFAULT || arg == NULL)
		return (-1);
	/* No process_vm_readv here (a filter): read it as the kernel will. */
	memcpy(reg, arg, len);
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
	struct uffdio_register	 reg;
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
	    __atomic_load_n(&preload_used, __ATOMIC_RELAXED) == 0 &&
	    __atomic_load_n(&preload_pool_mapped, __ATOMIC_RELAXED) == 0) ||
	    (req == UFFDIO_UNREGISTER &&
	    __atomic_load_n(&preload_handed, __ATOMIC_RELAXED) == 0) ||
	    preload_from_libhpz(__builtin_return_address(0)) ||
	    preload_uffd_peek(arg, req == UFFDIO_REGISTER ? sizeof(reg) :
	    sizeof(reg.range), &reg) != 0 || reg.range.len == 0)
		return (preload_real_ioctl(fd, req, arg));
	start = (uintptr_t)reg.range.start;
	end = start + reg.range.len < start ? UINTPTR_MAX :
	    start + (uintptr_t)reg.range.len;
	preload_busy++;
	if (req == UFFDIO_REGISTER)
		handed = preload_uffd_hand_over(fd, start, end);
	/*
	 * MISSING or MINOR on a pool file: the zero pages hpz-run put there
	 * would raise neither; they go first, as holes of its own memfd.
	 */
	if (req == UFFDIO_REGISTER && (reg.mode &
	    (UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_MINOR)) != 0)
		(void)preload_pool_unfill(start, end);
	errno = saved;
	rc = preload_real_ioctl(fd, req, arg);
	saved = errno;
	/* A probe that failed, or an unregister: ours again. */
	if ((req == UFFDIO_REGISTER && rc == -1 && handed != 0) ||
	    (req == UFFDIO_UNREGISTER && rc == 0))
		preload_uffd_take_back(-1, start, end);
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
		preload_uffd_take_back(fd, 0, 0);
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
				preload_uffd_settle(fds[i]);
		}
		preload_busy--;
		errno = saved;
	}
	if (real_sendmsg != NULL)
		return (real_sendmsg(sock, msg, flags));
	return ((ssize_t)syscall(SYS_sendmsg, sock, msg, flags));
}
