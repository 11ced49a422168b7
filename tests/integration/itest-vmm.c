/*
 * itest-vmm.c - what a VM monitor does to guest RAM besides touching it,
 * against the real daemon:
 *
 *   - its own userfaultfd on a range hpz-run registered (QEMU's postcopy,
 *     background snapshot and their probes): hpz-run hands the range
 *     over, garbage dropped, and takes it back when the program lets go;
 *   - memory given back (a balloon): fallocate(PUNCH_HOLE), MADV_REMOVE,
 *     MADV_DONTNEED on registered data and garbage pages, then reused;
 *   - another process that maps the same file, where no uffd guards
 *     garbage: libhpz refuses HPZ_DISCARD, hpz-run registers without it,
 *     and drops garbage before it passes the file on (SCM_RIGHTS);
 *   - hpz-run's selection by file name and by fd;
 *   - a snapshot loader on a fresh hugetlb memfd of its own that hpz-run
 *     made a pool file (a daemon of the test's own, with a pool): its own
 *     MISSING uffd gets every fault, also after a punch after sizing.
 *
 * The programs hpz-run runs are this binary: $HPZ_VMM_CHILD names the
 * mode, which a constructor runs before criterion starts.  Every access
 * that could wait on a fault runs under the child's alarm or a bounded
 * wait, so that a fault nobody serves fails instead of hanging.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/falloc.h>
#include <linux/memfd.h>
#include <linux/userfaultfd.h>

#include <criterion/criterion.h>

#include "itest.h"
#include "uffd-compat.h"

#define PAGE		(2 * MiB)
#define NPAGES		8
#define LEN		(NPAGES * PAGE)
#define HUGE_FLAGS	(MFD_HUGETLB | MFD_HUGE_2MB)
#define OLD		0xee		/* the last guest's bytes: garbage */
#define CHILD_ALARM_S	60		/* "did not hang" */
#define RUN_TIMEOUT_S	120
#define SELECT_FD	5		/* the fd hpz-run -F gets */

/* --- the child: runs under hpz-run, before criterion --------------------- */

/* Is a region of this process listed by the daemon at addr? */
static int
vchild_listed(const void *addr)
{
	struct hpz_region_info	info[64];
	size_t			n, i;

	if (hpz_list_regions(info, 64, &n) != 0)
		return (-1);
	for (i = 0; i < n && i < 64; i++)
		if (info[i].addr == (uintptr_t)addr &&
		    info[i].pid == (int)getpid())
			return (1);
	return (0);
}

/* The test's file, inherited on $HPZ_VMM_FD, mapped shared. */
static unsigned char *
vchild_map(int *fdp)
{
	const char	*s = getenv("HPZ_VMM_FD");
	void		*p;

	if (s == NULL)
		return (NULL);
	*fdp = atoi(s);
	p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, *fdp, 0);
	return (p == MAP_FAILED ? NULL : p);
}

/* A uffd of the child's own, as QEMU makes one. */
static int
vchild_uffd(uint64_t features)
{
	struct uffdio_api	api;
	int			fd;

	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return (-1);
	memset(&api, 0, sizeof(api));
	api.api = UFFD_API;
	api.features = features;
	if (ioctl(fd, UFFDIO_API, &api) == -1) {
		close(fd);
		return (-2);
	}
	return (fd);
}

/* The child's own fault handler: every MISSING fault gets a 0x5c page. */
struct vchild_server {
	int		 uffd;
	int		 stop;
	int		 faults;
	unsigned char	*src;
};

static void *
vchild_serve(void *arg)
{
	struct vchild_server	*s = arg;
	struct uffd_msg		 m;
	struct uffdio_copy	 c;
	struct pollfd		 pfd = { .fd = s->uffd, .events = POLLIN };

	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
		if (poll(&pfd, 1, 100) != 1)
			continue;
		if (read(s->uffd, &m, sizeof(m)) != (ssize_t)sizeof(m) ||
		    m.event != UFFD_EVENT_PAGEFAULT)
			continue;
		/* Counted first: the copy wakes the faulting thread. */
		__atomic_add_fetch(&s->faults, 1, __ATOMIC_RELEASE);
		memset(&c, 0, sizeof(c));
		c.dst = m.arg.pagefault.address & ~(uint64_t)(PAGE - 1);
		c.src = (uintptr_t)s->src;
		c.len = PAGE;
		(void)ioctl(s->uffd, UFFDIO_COPY, &c);
	}
	return (NULL);
}

/*
 * postcopy: what QEMU's destination does at the switch.  hpz-run -f
 * discard registered the map over the last guest's bytes; page 0 is
 * written, page 1 read (cleared), the rest is garbage.  The child's own
 * MISSING uffd must register, see no garbage (a garbage page left in the
 * file would read OLD with no fault at all), serve its faults; after its
 * UFFDIO_UNREGISTER the daemon has the range again, its data kept.
 */
static int
vchild_postcopy(void)
{
	struct vchild_server	 s = { 0 };
	struct uffdio_register	 reg;
	struct uffdio_range	 range;
	unsigned char		*p;
	pthread_t		 t;
	int			 fd, rc = 0;

	if ((p = vchild_map(&fd)) == NULL)
		return (itest_child_fail("mmap: %s", strerror(errno)));
	if (vchild_listed(p) != 1)
		return (itest_child_fail("hpz-run did not register the map"));
	memset(p, 0x11, PAGE);
	if ((rc = itest_child_check(p + PAGE, PAGE, 0, "garbage page 1")) != 0)
		return (rc);

	if ((s.uffd = vchild_uffd(UFFD_FEATURE_MISSING_HUGETLBFS)) < 0)
		return (itest_child_fail("own uffd: %s", strerror(errno)));
	memset(&reg, 0, sizeof(reg));
	reg.range.start = (uintptr_t)p;
	reg.range.len = LEN;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if (ioctl(s.uffd, UFFDIO_REGISTER, &reg) == -1)
		return (itest_child_fail("own UFFDIO_REGISTER: %s", strerror(errno)));
	if (vchild_listed(p) != 0)
		return (itest_child_fail("the daemon still lists the range"));
	s.src = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s.src == MAP_FAILED)
		return (itest_child_fail("mmap: %s", strerror(errno)));
	memset(s.src, 0x5c, PAGE);
	if (pthread_create(&t, NULL, vchild_serve, &s) != 0)
		return (itest_child_fail("pthread_create"));

	rc |= itest_child_check(p, PAGE, 0x11, "data page 0, own uffd");
	rc |= itest_child_check(p + PAGE, PAGE, 0, "cleared page 1, own uffd");
	rc |= itest_child_check(p + 2 * PAGE, PAGE, 0x5c, "garbage page 2, own uffd");
	if (__atomic_load_n(&s.faults, __ATOMIC_ACQUIRE) < 1)
		rc |= itest_child_fail("the child's own handler served no fault");

	range.start = (uintptr_t)p;
	range.len = LEN;
	if (ioctl(s.uffd, UFFDIO_UNREGISTER, &range) == -1)
		return (itest_child_fail("own UFFDIO_UNREGISTER: %s",
		    strerror(errno)));
	__atomic_store_n(&s.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	close(s.uffd);
	if (vchild_listed(p) != 1)
		return (itest_child_fail("not registered again after the "
		    "program's UFFDIO_UNREGISTER"));
	/* Served by the daemon again: data kept, the rest zero. */
	rc |= itest_child_check(p, PAGE, 0x11, "data page 0, taken back");
	rc |= itest_child_check(p + 2 * PAGE, PAGE, 0x5c, "page 2, taken back");
	rc |= itest_child_check(p + 3 * PAGE, (NPAGES - 3) * PAGE, 0,
	    "garbage pages 3-7, taken back");
	printf("child: own handler served %d faults\n", s.faults);
	return (rc);
}

/*
 * wpprobe: QEMU's background-snapshot probe registers WP on guest RAM,
 * then closes its uffd without unregistering; then the real thing
 * registers again and unregisters at the end.
 */
static int
vchild_wpprobe(void)
{
	struct uffdio_register	 reg;
	struct uffdio_range	 range;
	unsigned char		*p;
	int			 fd, uffd, round, rc = 0;

	if ((p = vchild_map(&fd)) == NULL)
		return (itest_child_fail("mmap: %s", strerror(errno)));
	memset(p, 0x22, PAGE);
	for (round = 0; round < 2; round++) {
		uffd = vchild_uffd(UFFD_FEATURE_PAGEFAULT_FLAG_WP);
		if (uffd == -2) {
			printf("child: no uffd write-protect here\n");
			return (77);
		}
		if (uffd < 0)
			return (itest_child_fail("own uffd: %s", strerror(errno)));
		memset(&reg, 0, sizeof(reg));
		reg.range.start = (uintptr_t)p;
		reg.range.len = LEN;
		reg.mode = UFFDIO_REGISTER_MODE_WP;
		if (ioctl(uffd, UFFDIO_REGISTER, &reg) == -1) {
			if (errno == EINVAL) {
				printf("child: no uffd write-protect on "
				    "hugetlb shared memory here\n");
				return (77);
			}
			return (itest_child_fail("WP UFFDIO_REGISTER: %s",
			    strerror(errno)));
		}
		if (round == 1) {
			range.start = (uintptr_t)p;
			range.len = LEN;
			if (ioctl(uffd, UFFDIO_UNREGISTER, &range) == -1)
				return (itest_child_fail("UFFDIO_UNREGISTER: %s",
				    strerror(errno)));
		}
		close(uffd);
		if (vchild_listed(p) != 1)
			return (itest_child_fail("round %d: not registered again "
			    "after the program %s", round, round == 0 ?
			    "closed its uffd" : "unregistered"));
	}
	rc |= itest_child_check(p, PAGE, 0x22, "data page 0");
	rc |= itest_child_check(p + PAGE, (NPAGES - 1) * PAGE, 0, "the rest");
	return (rc);
}

/* badprobe: a register the kernel refuses leaves the range with hpzerod. */
static int
vchild_badprobe(void)
{
	struct uffdio_register	 reg;
	unsigned char		*p;
	int			 fd, uffd;

	if ((p = vchild_map(&fd)) == NULL)
		return (itest_child_fail("mmap: %s", strerror(errno)));
	if ((uffd = vchild_uffd(0)) < 0)
		return (itest_child_fail("own uffd: %s", strerror(errno)));
	memset(&reg, 0, sizeof(reg));
	reg.range.start = (uintptr_t)p;
	reg.range.len = LEN;
	reg.mode = 0;			/* no mode: EINVAL */
	if (ioctl(uffd, UFFDIO_REGISTER, &reg) == 0 || errno != EINVAL)
		return (itest_child_fail("a register with no mode did not fail "
		    "with EINVAL"));
	if (vchild_listed(p) != 1)
		return (itest_child_fail("not registered again after a failed "
		    "probe"));
	close(uffd);
	return (itest_child_check(p, LEN, 0, "the map"));
}

/*
 * sendfd: under -f discard the child writes page 0 and reads page 1, the
 * rest stays garbage; then it sends the file to a process of its own
 * (forked, mapping with the raw system call, so no preload is involved
 * on that side): that process must read the data and zeros, never OLD.
 */
static int
vchild_sendfd(void)
{
	struct msghdr	 msg;
	struct cmsghdr	*c;
	struct iovec	 iov;
	union {
		char		buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr	align;
	} u;
	unsigned char	*p, *q;
	char		 byte = 'f';
	pid_t		 pid;
	int		 fd, sv[2], got, st, rc = 0;

	if ((p = vchild_map(&fd)) == NULL)
		return (itest_child_fail("mmap: %s", strerror(errno)));
	memset(p, 0x11, PAGE);
	if ((rc = itest_child_check(p + PAGE, PAGE, 0, "garbage page 1")) != 0)
		return (rc);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1)
		return (itest_child_fail("socketpair: %s", strerror(errno)));
	if ((pid = fork()) == -1)
		return (itest_child_fail("fork: %s", strerror(errno)));
	if (pid == 0) {
		close(sv[0]);
		memset(&msg, 0, sizeof(msg));
		iov.iov_base = &byte;
		iov.iov_len = 1;
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = u.buf;
		msg.msg_controllen = sizeof(u.buf);
		alarm(CHILD_ALARM_S);
		if (recvmsg(sv[1], &msg, 0) != 1 ||
		    (c = CMSG_FIRSTHDR(&msg)) == NULL ||
		    c->cmsg_type != SCM_RIGHTS)
			_exit(itest_child_fail("recvmsg: %s", strerror(errno)));
		memcpy(&got, CMSG_DATA(c), sizeof(got));
		q = (unsigned char *)syscall(SYS_mmap, NULL, LEN, PROT_READ,
		    MAP_SHARED, got, 0);
		if (q == MAP_FAILED)
			_exit(itest_child_fail("mmap: %s", strerror(errno)));
		rc = itest_child_check(q, PAGE, 0x11, "receiver: data page 0");
		rc |= itest_child_check(q + PAGE, (NPAGES - 1) * PAGE, 0,
		    "receiver: pages 1-7");
		_exit(rc);
	}
	close(sv[1]);
	memset(&msg, 0, sizeof(msg));
	iov.iov_base = &byte;
	iov.iov_len = 1;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = u.buf;
	msg.msg_controllen = sizeof(u.buf);
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(fd));
	if (sendmsg(sv[0], &msg, 0) != 1)
		return (itest_child_fail("sendmsg: %s", strerror(errno)));
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		return (itest_child_fail("the receiver saw the wrong bytes "
		    "(status 0x%x)", st));
	/* Ours, still served: data kept, the rest zero. */
	rc |= itest_child_check(p, PAGE, 0x11, "sender: data page 0");
	rc |= itest_child_check(p + PAGE, (NPAGES - 1) * PAGE, 0,
	    "sender: pages 1-7");
	if (vchild_listed(p) != 1)
		rc |= itest_child_fail("the sender's map is not registered");
	return (rc);
}

/* mapped: the test maps the file too: its bytes are kept, not garbage. */
static int
vchild_mapped(void)
{
	unsigned char	*p;
	int		 fd;

	if ((p = vchild_map(&fd)) == NULL)
		return (itest_child_fail("mmap: %s", strerror(errno)));
	if (vchild_listed(p) != 1)
		return (itest_child_fail("hpz-run did not register the map"));
	return (itest_child_check(p, LEN, OLD, "a map another process shares"));
}

/*
 * select: three files; the test runs hpz-run -n '/memfd:itest-vmm-ram*'
 * -x '*ivshmem*' -F SELECT_FD.  The RAM and the fd's file are registered,
 * the ivshmem-like one and an unnamed extra are left to the kernel.
 */
static int
vchild_select(void)
{
	static const struct {
		const char	*name;
		int		 want;
	} files[] = {
		{ "itest-vmm-ram", 1 },
		{ "itest-vmm-ram-ivshmem", 0 },	/* -n matches, -x wins */
		{ "itest-vmm-other", 0 },
	};
	unsigned char	*p;
	size_t		 i;
	int		 fd, rc = 0;

	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		if ((fd = memfd_create(files[i].name, HUGE_FLAGS)) == -1 ||
		    ftruncate(fd, (off_t)LEN) == -1)
			return (itest_child_fail("memfd: %s", strerror(errno)));
		p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			return (itest_child_fail("mmap: %s", strerror(errno)));
		if (vchild_listed(p) != files[i].want)
			rc |= itest_child_fail("%s: %sregistered", files[i].name,
			    files[i].want ? "not " : "");
		rc |= itest_child_check(p, PAGE, 0, files[i].name);
	}
	/* The file hpz-run was given by fd, mapped through a dup. */
	if ((fd = dup(SELECT_FD)) == -1)
		return (itest_child_fail("dup: %s", strerror(errno)));
	p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return (itest_child_fail("mmap: %s", strerror(errno)));
	if (vchild_listed(p) != 1)
		rc |= itest_child_fail("the -F file is not registered");
	return (rc);
}

/*
 * loader: a snapshot restore on a fresh hugetlb memfd of its own (issue
 * 32): made and sized (under hpz-run with the pool on, a pool file comes
 * in at the ftruncate), punched whole after sizing if $HPZ_VMM_PUNCH is
 * set, mapped shared, registered MISSING on a uffd of its own; a reader
 * thread touches every page, the handler fills each with UFFDIO_COPY of
 * its own pattern.  Every page must fault once and hold its pattern, as
 * without hpz-run.
 */
#define LOAD_LEN	(128 * MiB)
#define LOAD_PAGES	(LOAD_LEN / PAGE)

/* The byte the loader puts in page i: never zero, differs page to page. */
static unsigned char
vload_byte(size_t i)
{
	return ((unsigned char)(0x80 | (i & 0x7f)));
}

struct vload {
	int		 uffd;
	int		 stop;
	int		 faults;
	int		 error;
	unsigned char	*base;
	unsigned char	*src;
};

static void *
vload_serve(void *arg)
{
	struct vload		*l = arg;
	struct uffdio_copy	 copy;
	struct uffd_msg		 m;
	struct pollfd		 pfd;
	uintptr_t		 a;
	size_t			 i;

	pfd.fd = l->uffd;
	pfd.events = POLLIN;
	while (!__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE)) {
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		while (read(l->uffd, &m, sizeof(m)) == (ssize_t)sizeof(m)) {
			if (m.event != UFFD_EVENT_PAGEFAULT)
				continue;
			a = (uintptr_t)m.arg.pagefault.address & ~(PAGE - 1);
			i = (a - (uintptr_t)l->base) / PAGE;
			memset(l->src, vload_byte(i), PAGE);
			memset(&copy, 0, sizeof(copy));
			copy.dst = a;
			copy.src = (uintptr_t)l->src;
			copy.len = PAGE;
			if (ioctl(l->uffd, UFFDIO_COPY, &copy) == -1 &&
			    errno != EEXIST)
				__atomic_store_n(&l->error, errno,
				    __ATOMIC_RELEASE);
			__atomic_add_fetch(&l->faults, 1, __ATOMIC_ACQ_REL);
		}
	}
	return (NULL);
}

/* Huge pages of [p, p+len) mapped in this process (pagemap), or -1. */
static long
vload_mapped(const void *p, size_t len)
{
	uint64_t	ent;
	uintptr_t	a;
	long		n = 0;
	int		fd;

	if ((fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC)) < 0)
		return (-1);
	for (a = (uintptr_t)p; a < (uintptr_t)p + len; a += PAGE)
		if (pread(fd, &ent, sizeof(ent), (off_t)(a / 4096 *
		    sizeof(ent))) == (ssize_t)sizeof(ent) && (ent & (1ULL << 63)))
			n++;
	close(fd);
	return (n);
}

/* The reader: one touch of every page, as a restore's consumer does. */
static void *
vload_touch(void *arg)
{
	struct vload	*l = arg;
	size_t		 i;

	for (i = 0; i < LOAD_PAGES; i++)
		(void)*(volatile unsigned char *)(l->base + i * PAGE + 4096);
	return (NULL);
}

static int
vchild_loader(void)
{
	struct vload		 l;
	struct uffdio_register	 reg;
	pthread_t		 ts, tt;
	size_t			 i;
	long			 n;
	int			 fd, rc = 0;

	memset(&l, 0, sizeof(l));
	fd = memfd_create("itest-vmm-loader", HUGE_FLAGS | MFD_CLOEXEC);
	if (fd < 0)
		return (itest_child_fail("memfd_create: %s", strerror(errno)));
	if (ftruncate(fd, (off_t)LOAD_LEN) != 0)
		return (itest_child_fail("ftruncate: %s", strerror(errno)));
	if (getenv("HPZ_VMM_PUNCH") != NULL && fallocate(fd,
	    FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
	    (off_t)LOAD_LEN) != 0)
		return (itest_child_fail("punch: %s", strerror(errno)));
	l.base = mmap(NULL, LOAD_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
	    0);
	if (l.base == MAP_FAILED)
		return (itest_child_fail("mmap: %s", strerror(errno)));
	l.src = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (l.src == MAP_FAILED)
		return (itest_child_fail("mmap: %s", strerror(errno)));
	/* What it punched stays a hole: nothing maps it again. */
	if (getenv("HPZ_VMM_PUNCH") != NULL && (n = vload_mapped(l.base,
	    LOAD_LEN)) != 0)
		return (itest_child_fail("%ld of %zu pages punched after sizing "
		    "are allocated again at mmap", n, (size_t)LOAD_PAGES));
	if ((l.uffd = vchild_uffd(UFFD_FEATURE_MISSING_HUGETLBFS)) < 0)
		return (itest_child_fail("own uffd: %s", strerror(errno)));
	memset(&reg, 0, sizeof(reg));
	reg.range.start = (uintptr_t)l.base;
	reg.range.len = LOAD_LEN;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if (ioctl(l.uffd, UFFDIO_REGISTER, &reg) == -1)
		return (itest_child_fail("own UFFDIO_REGISTER: %s",
		    strerror(errno)));
	if ((reg.ioctls & (1ULL << _UFFDIO_COPY)) == 0)
		return (itest_child_fail("no UFFDIO_COPY on the range"));
	if (pthread_create(&ts, NULL, vload_serve, &l) != 0 ||
	    pthread_create(&tt, NULL, vload_touch, &l) != 0)
		return (itest_child_fail("pthread_create"));
	pthread_join(tt, NULL);
	__atomic_store_n(&l.stop, 1, __ATOMIC_RELEASE);
	pthread_join(ts, NULL);
	printf("child: loader: %d of %zu faults reached the program's "
	    "handler\n", l.faults, (size_t)LOAD_PAGES);
	if (l.error != 0)
		rc |= itest_child_fail("UFFDIO_COPY: %s", strerror(l.error));
	if (l.faults != (int)LOAD_PAGES)
		rc |= itest_child_fail("%d faults of %zu pages", l.faults,
		    (size_t)LOAD_PAGES);
	for (i = 0; i < LOAD_PAGES && rc == 0; i++) {
		char	what[64];

		snprintf(what, sizeof(what), "page %zu", i);
		rc |= itest_child_check(l.base + i * PAGE, PAGE,
		    vload_byte(i), what);
	}
	close(l.uffd);
	return (rc);
}

__attribute__((constructor))
static void
vchild_main(void)
{
	static const struct {
		const char	*name;
		int		(*fn)(void);
	} modes[] = {
		{ "postcopy", vchild_postcopy },
		{ "wpprobe", vchild_wpprobe },
		{ "badprobe", vchild_badprobe },
		{ "sendfd", vchild_sendfd },
		{ "mapped", vchild_mapped },
		{ "select", vchild_select },
		{ "loader", vchild_loader },
	};
	const char	*mode = getenv("HPZ_VMM_CHILD");
	size_t		 i;

	if (mode == NULL)
		return;
	alarm(CHILD_ALARM_S);
	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		if (strcmp(modes[i].name, mode) == 0) {
			fflush(stdout);
			i = (size_t)modes[i].fn();
			fflush(stdout);
			_exit((int)i);
		}
	}
	_exit(itest_child_fail("unknown mode %s", mode));
}

/* --- the tests ------------------------------------------------------------ */

/*
 * Run this binary in mode under hpz-run with opts (NULL-terminated),
 * the file fd on $HPZ_VMM_FD (and on SELECT_FD if sel); collect its
 * output and status.
 */
static void
vrun(struct itest_out *o, const char *mode, int fd, int sel,
    const char *const *opts)
{
	const char	*dir = getenv("HPZ_BUILDDIR"), *argv[32];
	char		 self[PATH_MAX], hpzrun[PATH_MAX], fds[16];
	pid_t		 pid;
	int		 pipefd[2], i;

	cr_assert_not_null(dir, "HPZ_BUILDDIR is not set (run via run.sh)");
	itest_self(self, sizeof(self));
	snprintf(hpzrun, sizeof(hpzrun), "%s/client/hpz-run", dir);
	argv[0] = hpzrun;
	for (i = 0; opts[i] != NULL && i < 28; i++)
		argv[i + 1] = opts[i];
	argv[++i] = "--";
	argv[++i] = self;
	argv[++i] = NULL;

	cr_assert_eq(pipe2(pipefd, O_CLOEXEC), 0);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(pipefd[1], STDOUT_FILENO);
		dup2(pipefd[1], STDERR_FILENO);
		if (sel && dup2(fd, SELECT_FD) == -1)
			_exit(98);
		snprintf(fds, sizeof(fds), "%d", fd);
		unsetenv("HPZ_RUN_MIN");
		unsetenv("HPZ_RUN_FLAGS");
		unsetenv("HPZ_RUN_NAME");
		unsetenv("HPZ_RUN_EXCLUDE");
		unsetenv("HPZ_RUN_FILE");
		setenv("HPZ_VMM_CHILD", mode, 1);
		setenv("HPZ_VMM_FD", fds, 1);
		itest_hpzrun_env(dir);
		execv(hpzrun, (char *const *)argv);
		_exit(99);
	}
	close(pipefd[1]);
	itest_collect(o, pipefd[0], pid, RUN_TIMEOUT_S, "hpz-run");
}

static void
vrun_ok(struct itest_out *o, const char *mode, int fd, int sel,
    const char *const *opts)
{
	vrun(o, mode, fd, sel, opts);
	if (WIFEXITED(o->status) && WEXITSTATUS(o->status) == 77)
		cr_skip_test("%s: %s", mode, o->text);
	cr_assert(WIFEXITED(o->status) && WEXITSTATUS(o->status) == 0,
	    "mode %s: exit status 0x%x:\n%s", mode, o->status, o->text);
}

static int
vrun_has(const struct itest_out *o, const char *needle)
{
	return (strstr(o->text, needle) != NULL);
}

/* A hugetlb memfd of LEN, every byte v: the last guest's RAM. */
static int
vfile(unsigned char v)
{
	void	*p;
	int	 fd;

	itest_need_pages(2048, 3 * NPAGES);
	fd = memfd_create("itest-vmm", HUGE_FLAGS);
	cr_assert_geq(fd, 0, "memfd_create: %s", strerror(errno));
	cr_assert_eq(ftruncate(fd, (off_t)LEN), 0);
	p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert_neq(p, MAP_FAILED);
	memset(p, v, LEN);
	munmap(p, LEN);
	return (fd);
}

/* Bytes of the file as the kernel serves it, unregistered. */
static void
vexpect_file(int fd, size_t off, size_t len, unsigned char v,
    const char *what)
{
	unsigned char	*p;
	size_t		 first, n;

	p = mmap(NULL, LEN, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(p, MAP_FAILED);
	n = itest_count_not(p + off, len, v, &first);
	munmap(p, LEN);
	cr_assert_eq(n, 0, "%s: %zu bytes not 0x%02x, first at %zu", what, n,
	    v, first);
}

/*
 * noscrub: garbage stays garbage until a fault (the background scrub
 * would clear it first, and leave nothing for a hand-over to drop).
 */
static const char *const discard_opts[] = { "-v", "-m", "4M", "-f",
	"discard,noscrub", NULL };

Test(vmm, own_uffd_takes_range_and_gives_it_back, .timeout = 180)
{
	struct hpz_status	before, after;
	struct itest_out		o;
	int			fd = vfile(OLD);

	before = itest_status();
	vrun_ok(&o, "postcopy", fd, 0, discard_opts);
	cr_assert(vrun_has(&o, "handed 16 MiB at"), "%s", o.text);
	cr_assert(vrun_has(&o, "took 16 MiB at"), "%s", o.text);
	after = itest_status();
	/* Registered, handed over (unregistered), registered again. */
	cr_assert_geq(after.registers - before.registers, 2, "%s", o.text);
	/* What the program's uffd placed stays in the file. */
	vexpect_file(fd, 0, PAGE, 0x11, "file: data page 0");
	vexpect_file(fd, 2 * PAGE, PAGE, 0x5c, "file: page 2");
	close(fd);
}

Test(vmm, wp_probe_closed_then_real_snapshot, .timeout = 180)
{
	const char *const	opts[] = { "-v", "-m", "4M", NULL };
	struct itest_out		o;
	int			fd = vfile(0);

	vrun_ok(&o, "wpprobe", fd, 0, opts);
	cr_assert(vrun_has(&o, "handed"), "%s", o.text);
	close(fd);
}

Test(vmm, failed_probe_stays_registered, .timeout = 180)
{
	const char *const	opts[] = { "-v", "-m", "4M", NULL };
	struct itest_out		o;
	int			fd = vfile(0);

	vrun_ok(&o, "badprobe", fd, 0, opts);
	close(fd);
}

Test(vmm, file_sent_to_another_process_loses_its_garbage, .timeout = 180)
{
	struct itest_out	o;
	int		fd = vfile(OLD);

	vrun_ok(&o, "sendfd", fd, 0, discard_opts);
	cr_assert(vrun_has(&o, "goes to another process: its garbage was "
	    "dropped first"), "%s", o.text);
	close(fd);
}

Test(vmm, discard_not_applied_to_a_file_mapped_elsewhere, .timeout = 180)
{
	struct itest_out	 o;
	unsigned char	*p;
	size_t		 first;
	int		 fd = vfile(OLD);

	/* This process keeps the file mapped while the child runs. */
	p = mmap(NULL, LEN, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(p, MAP_FAILED);
	vrun_ok(&o, "mapped", fd, 0, discard_opts);
	cr_assert(vrun_has(&o, "registered without discard, its contents "
	    "kept"), "%s", o.text);
	cr_assert_eq(itest_count_not(p, LEN, OLD, &first), 0,
	    "this process's view changed at %zu", first);
	munmap(p, LEN);
	close(fd);
}

/* libhpz itself: HPZ_DISCARD refused while another process maps it. */
Test(vmm, api_refuses_discard_while_another_process_maps, .timeout = 120)
{
	struct hpz_region	 r;
	unsigned char		*p;
	char			 c = 0;
	pid_t			 pid;
	int			 fd = vfile(OLD), go[2], ready[2], st, error;

	cr_assert_eq(pipe(go), 0);
	cr_assert_eq(pipe(ready), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* The other mapper: maps pages 2-3 only, waits, unmaps. */
		p = mmap(NULL, 2 * PAGE, PROT_READ, MAP_SHARED, fd, 2 * PAGE);
		if (p == MAP_FAILED)
			_exit(1);
		(void)!write(ready[1], "r", 1);
		alarm(CHILD_ALARM_S);
		(void)!read(go[0], &c, 1);
		_exit(itest_count_not(p, 2 * PAGE, OLD, &(size_t){0}) ? 2 : 0);
	}
	cr_assert_eq(read(ready[0], &c, 1), 1);
	p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert_neq(p, MAP_FAILED);
	memset(&r, 0, sizeof(r));
	r.addr = p;
	r.len = LEN;
	r.fd = fd;
	r.flags = HPZ_DISCARD;
	error = hpz_register(&r);
	cr_assert_eq(error, -EBUSY, "hpz_register: %d (%s)", error,
	    hpz_last_error());
	cr_assert(strstr(hpz_last_error(), "maps this range of the file") !=
	    NULL, "%s", hpz_last_error());
	/* Pages 0-1 only: the other process maps none of them. */
	r.len = 2 * PAGE;
	error = hpz_register(&r);
	cr_assert_eq(error, 0, "pages 0-1: %s", hpz_last_error());
	cr_assert_eq(itest_count_nonzero(p, 2 * PAGE, &(size_t){0}), 0);
	cr_assert_eq(hpz_unregister(&r), 0);
	(void)!write(go[1], "g", 1);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	    "the other mapper saw its bytes change (status 0x%x)", st);
	/* Once it is gone, the whole file may be declared garbage. */
	r.len = LEN;
	error = hpz_register(&r);
	cr_assert_eq(error, 0, "after the other left: %s", hpz_last_error());
	cr_assert_eq(itest_count_nonzero(p, LEN, &(size_t){0}), 0);
	cr_assert_eq(hpz_unregister(&r), 0);
	munmap(p, LEN);
	close(fd);
}

Test(vmm, select_by_name_exclusion_and_fd, .timeout = 180)
{
	const char *const	opts[] = { "-v", "-m", "4M", "-n",
	    "/memfd:itest-vmm-ram*", "-x", "*ivshmem*", "-F", "5", NULL };
	struct itest_out		o;
	int			fd = vfile(0);

	/* vrun puts the file on SELECT_FD in hpz-run's process. */
	vrun_ok(&o, "select", fd, 1, opts);
	cr_assert(vrun_has(&o, "its name matches an exclusion (-x)"), "%s",
	    o.text);
	cr_assert(vrun_has(&o, "it matches no -n pattern and is no -F file"),
	    "%s", o.text);
	close(fd);
}

/*
 * A balloon, done by hand on a registered region: pages given back by
 * fallocate(PUNCH_HOLE) (no uffd event), MADV_REMOVE and MADV_DONTNEED,
 * data and garbage alike, then reused.  Nothing old reads back, no data
 * the client kept is zeroed.
 */
static void
vexpect(const void *p, size_t len, unsigned char v, const char *what)
{
	itest_expect_bytes(p, len, v, CHILD_ALARM_S, what);
}

static void
vballoon(unsigned int flags)
{
	struct hpz_region	 r;
	unsigned char		*p;
	int			 fd = vfile(OLD), i;

	p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert_neq(p, MAP_FAILED);
	memset(&r, 0, sizeof(r));
	r.addr = p;
	r.len = LEN;
	r.fd = fd;
	r.flags = HPZ_DISCARD | flags;
	cr_assert_eq(hpz_register(&r), 0, "%s", hpz_last_error());
	/* Pages 0-3 data (written), 4-7 garbage (never touched). */
	for (i = 0; i < 4; i++)
		memset(p + (size_t)i * PAGE, 0x10 + i, PAGE);
	/* Given back: 1 and 5 punched, 2 and 6 removed, 3 and 7 dropped. */
	cr_assert_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	    1 * PAGE, PAGE), 0, "%s", strerror(errno));
	cr_assert_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	    5 * PAGE, PAGE), 0, "%s", strerror(errno));
	cr_assert_eq(madvise(p + 2 * PAGE, PAGE, MADV_REMOVE), 0);
	cr_assert_eq(madvise(p + 6 * PAGE, PAGE, MADV_REMOVE), 0);
	cr_assert_eq(madvise(p + 3 * PAGE, PAGE, MADV_DONTNEED), 0);
	cr_assert_eq(madvise(p + 7 * PAGE, PAGE, MADV_DONTNEED), 0);
	/* Read back: punched and removed read zero; DONTNEED keeps data. */
	vexpect(p, PAGE, 0x10, "data page 0, kept");
	vexpect(p + PAGE, PAGE, 0, "data page 1, punched");
	vexpect(p + 2 * PAGE, PAGE, 0, "data page 2, removed");
	vexpect(p + 3 * PAGE, PAGE, 0x13, "data page 3, dontneed");
	vexpect(p + 4 * PAGE, PAGE, 0, "garbage page 4");
	vexpect(p + 5 * PAGE, PAGE, 0, "garbage page 5, punched");
	vexpect(p + 6 * PAGE, PAGE, 0, "garbage page 6, removed");
	vexpect(p + 7 * PAGE, PAGE, 0, "garbage page 7, dontneed");
	/* Reused: written, given back by DONTNEED, read: the new bytes. */
	for (i = 1; i < NPAGES; i++)
		memset(p + (size_t)i * PAGE, 0x40 + i, PAGE);
	cr_assert_eq(madvise(p, LEN, MADV_DONTNEED), 0);
	for (i = 1; i < NPAGES; i++)
		vexpect(p + (size_t)i * PAGE, PAGE, 0x40 + i, "reused page");
	/* Punched again while registered, then reset: all zero. */
	cr_assert_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	    0, 2 * PAGE), 0);
	cr_assert_eq(hpz_reset(&r), 0, "%s", hpz_last_error());
	vexpect(p, LEN, 0, "after punch and reset");
	cr_assert_eq(hpz_unregister(&r), 0, "%s", hpz_last_error());
	munmap(p, LEN);
	close(fd);
}

Test(vmm, balloon_punch_remove_dontneed, .timeout = 180)
{
	vballoon(0);
}

Test(vmm, balloon_with_premap_and_eager, .timeout = 180)
{
	vballoon(HPZ_PREMAP | HPZ_AHEAD_EAGER);
}

/*
 * A daemon of the test's own with a pool of 2 MiB pages that holds a
 * loader's file (run.sh's has none); the test's socket from now on.
 */
static pid_t
vpool_start(char *dir, size_t dirsize, char *sock, size_t socksize)
{
	char			 conf[128], log[128];
	struct hpz_pool_info	 info[16];
	size_t			 n = 0, i;
	unsigned long long	 ready = 0;
	FILE			*f;
	pid_t			 pid;
	int			 tries;

	snprintf(dir, dirsize, "/tmp/hpz-vmm.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(sock, socksize, "%s/s.sock", dir);
	snprintf(conf, sizeof(conf), "%s/hpzerod.conf", dir);
	snprintf(log, sizeof(log), "%s/hpzerod.log", dir);
	cr_assert_not_null(f = fopen(conf, "w"));
	fprintf(f, "[pool]\nsize_2m = %zuM\nreserve_2m = 16M\nsize_1g = 0\n",
	    (size_t)(LOAD_LEN / MiB));
	fclose(f);
	pid = itest_fork_dying();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int	lfd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		int	null = open("/dev/null", O_RDWR);

		if (lfd >= 0)
			dup2(lfd, 2);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
		}
		execl(itest_daemon_path(), "hpzerod", "--config", conf,
		    "--socket", sock, "--workers", "2", (char *)NULL);
		_exit(121);
	}
	setenv("HPZ_SOCKET", sock, 1);
	unsetenv("HPZ_NO_POOL");
	/* A liveness bound, not a timing: the pool fills the file. */
	for (tries = 0; tries < 2000 * itest_wait_scale(); tries++) {
		ready = 0;
		if (access(sock, F_OK) == 0 && hpz_pool_status(info, 16,
		    &n) == 0)
			for (i = 0; i < n && i < 16; i++)
				if (info[i].page_size == PAGE)
					ready += info[i].ready_pages;
		if (ready >= LOAD_PAGES)
			break;
		usleep(10 * 1000);
	}
	cr_assert_geq(ready, LOAD_PAGES, "the pool holds %llu pages after "
	    "20 s, wanted %zu", ready, (size_t)LOAD_PAGES);
	return (pid);
}

static void
vpool_stop(pid_t pid, const char *dir)
{
	char	path[160];
	int	status;

	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
	snprintf(path, sizeof(path), "%s/hpzerod.conf", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/hpzerod.log", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/s.sock", dir);
	unlink(path);
	rmdir(dir);
}

/*
 * The loader under hpz-run with the pool on, premap on and off (punched
 * after sizing if punch): every fault reaches it, as without hpz-run.
 */
static void
vloader(int punch)
{
	const char *const	premap[] = { "-v", "-m", "2M", NULL };
	const char *const	nopremap[] = { "-v", "-m", "2M", "-f",
	    "nopremap", NULL };
	const char *const	*opts[] = { premap, nopremap };
	struct itest_out		o;
	char			dir[64], sock[128], want[96];
	pid_t			pid;
	int			k;

	/* The pool's file, its refill, and the loader's own pages. */
	itest_need_pages(2048, 3 * (long)LOAD_PAGES + 8);
	if (punch)
		setenv("HPZ_VMM_PUNCH", "1", 1);
	snprintf(want, sizeof(want), "child: loader: %zu of %zu faults",
	    (size_t)LOAD_PAGES, (size_t)LOAD_PAGES);
	for (k = 0; k < 2; k++) {
		pid = vpool_start(dir, sizeof(dir), sock, sizeof(sock));
		vrun(&o, "loader", -1, 0, opts[k]);
		vpool_stop(pid, dir);
		if (WIFEXITED(o.status) && WEXITSTATUS(o.status) == 77)
			cr_skip_test("loader: %s", o.text);
		cr_assert(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0,
		    "loader%s, pool on, premap %s: exit status 0x%x:\n%s",
		    punch ? " (punched after sizing)" : "", opts[k] == premap ?
		    "on" : "off", o.status, o.text);
		/* It ran on a pool file: the case this is about. */
		cr_assert(vrun_has(&o, "a pool file"), "no pool file:\n%s",
		    o.text);
		cr_assert(vrun_has(&o, want), "%s", o.text);
	}
}

Test(vmm, own_missing_uffd_loads_a_pool_file, .timeout = 240)
{
	vloader(0);
}

Test(vmm, own_missing_uffd_loads_a_pool_file_punched_after_sizing,
    .timeout = 240)
{
	vloader(1);
}
