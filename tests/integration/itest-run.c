/*
 * itest-run.c - hpz-run and libhpz-preload.so against the real daemon.
 * The program hpz-run runs is this very binary: when $HPZ_ITEST_CHILD names
 * a mode, a constructor does that mode's mapping work and exits before
 * criterion starts.  The test checks the child's exit, what it printed and
 * the daemon's counters before and after.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <linux/memfd.h>

#include <criterion/criterion.h>

#include "itest.h"
#include "uffd-compat.h"

#define RUN_LEN		(32 * MiB)	/* 16 huge pages */
#define RUN_HUGE	(MFD_HUGETLB | MFD_HUGE_2MB)
#define RUN_SELF	"@self"		/* argv word: this binary */
#define RUN_TIMEOUT_S	120

/* --- the child: runs under hpz-run, before criterion --------------------- */

static int
child_memfd(size_t len, unsigned int flags)
{
	int	fd;

	fd = memfd_create("itest-run", MFD_CLOEXEC | flags);
	if (fd == -1)
		return (-1);
	if (ftruncate(fd, (off_t)len) == -1) {
		close(fd);
		return (-1);
	}
	return (fd);
}

/* Every byte of [p, p+len) is v; written with w, every byte is w. */
static int
child_rewrite(void *p, size_t len, unsigned char v, unsigned char w,
    const char *what)
{
	int	rc;

	if ((rc = itest_child_check(p, len, v, what)) != 0)
		return (rc);
	memset(p, w, len);
	return (itest_child_check(p, len, w, what));
}

/* Map, check every byte is v, write w, check w. */
static int
child_use(int fd, size_t len, int flags, unsigned char v, unsigned char w,
    const char *what)
{
	unsigned char	*p;
	int		 rc;

	p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, fd, 0);
	if (p == MAP_FAILED)
		return (itest_child_fail("%s: mmap: %s", what, strerror(errno)));
	rc = child_rewrite(p, len, v, w, what);
	munmap(p, len);
	return (rc);
}

/* (a) A hugetlb memfd, as QEMU's memory-backend-memfd maps it. */
static int
child_fresh(void)
{
	unsigned char	*p;
	int		 fd;

	if ((fd = child_memfd(RUN_LEN, RUN_HUGE)) == -1)
		return (itest_child_fail("memfd: %s", strerror(errno)));
	p = mmap(NULL, RUN_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return (itest_child_fail("mmap: %s", strerror(errno)));
	/* Left mapped: the daemon drops the region when we exit. */
	return (child_rewrite(p, RUN_LEN, 0, 0x5a, "first touch"));
}

/* (b) A file the test filled: $HPZ_ITEST_EXPECT is what it must read. */
static int
child_file(void)
{
	const char	*fds = getenv("HPZ_ITEST_FD");
	const char	*expect = getenv("HPZ_ITEST_EXPECT");

	if (fds == NULL || expect == NULL)
		return (itest_child_fail("HPZ_ITEST_FD or HPZ_ITEST_EXPECT unset"));
	return (child_use(atoi(fds), RUN_LEN, MAP_SHARED,
	    (unsigned char)strtoul(expect, NULL, 16), 0x33, "file"));
}

/* (c) Memory hpz-run must not touch; each mapping is used and dropped. */
static int
child_leave(void)
{
	struct statfs	 sfs;
	const char	*dir = getenv("HPZ_BUILDDIR");
	char		 path[PATH_MAX];
	void		*p;
	int		 fd, rc = 0;

	if ((fd = child_memfd(RUN_LEN, RUN_HUGE)) == -1)
		return (itest_child_fail("memfd: %s", strerror(errno)));
	rc |= child_use(fd, RUN_LEN, MAP_PRIVATE, 0, 0x11, "private hugetlb");
	p = mmap(NULL, RUN_LEN, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return (itest_child_fail("read-only mmap: %s", strerror(errno)));
	rc |= itest_child_check(p, RUN_LEN, 0, "read-only hugetlb");
	munmap(p, RUN_LEN);
	close(fd);
	rc |= child_use(-1, RUN_LEN, MAP_SHARED | MAP_ANONYMOUS, 0, 0x22,
	    "shared anonymous");
	rc |= child_use(-1, RUN_LEN, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB,
	    0, 0x33, "private anonymous hugetlb");
	/* A file on an ordinary file system (the build tree, not tmpfs). */
	if (dir != NULL) {
		snprintf(path, sizeof(path), "%s/itest-run.%d", dir,
		    (int)getpid());
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd != -1) {
			unlink(path);
			if (fstatfs(fd, &sfs) == 0 &&
			    (long)sfs.f_type != 0x01021994L &&
			    ftruncate(fd, 4 * MiB) == 0)
				rc |= child_use(fd, 4 * MiB, MAP_SHARED, 0,
				    0x44, "disk file");
			close(fd);
		}
	}
	return (rc);
}

/* (d) Shared memory below the minimum (the test passes -m 4M). */
static int
child_small(void)
{
	int	fd, rc = 0;

	if ((fd = child_memfd(1 * MiB, 0)) == -1)
		return (itest_child_fail("memfd: %s", strerror(errno)));
	rc |= child_use(fd, 1 * MiB, MAP_SHARED, 0, 0x55, "1 MiB shmem");
	close(fd);
	if ((fd = child_memfd(3 * MiB, 0)) == -1)
		return (itest_child_fail("memfd: %s", strerror(errno)));
	rc |= child_use(fd, 3 * MiB, MAP_SHARED, 0, 0x56, "3 MiB shmem");
	close(fd);
	if ((fd = child_memfd(2 * MiB, RUN_HUGE)) == -1)
		return (itest_child_fail("memfd: %s", strerror(errno)));
	rc |= child_use(fd, 2 * MiB, MAP_SHARED, 0, 0x57, "2 MiB hugetlb");
	close(fd);
	return (rc);
}

/* Shared memory above the minimum: served like hugetlb, 4 KiB pages. */
static int
child_shmem(void)
{
	int	fd, rc;

	if ((fd = child_memfd(8 * MiB, 0)) == -1)
		return (itest_child_fail("memfd: %s", strerror(errno)));
	rc = child_use(fd, 8 * MiB, MAP_SHARED, 0, 0x66, "8 MiB shmem");
	close(fd);
	return (rc);
}

/*
 * (e) Unmap, map again, unmap a piece, map over, move: each step hands
 * the range back and forth and the data must survive every one.
 */
static int
child_remap(void)
{
	unsigned char	*p, *q, *t, *resv;
	uintptr_t	 a;
	int		 fd, rc;

	if ((fd = child_memfd(RUN_LEN, RUN_HUGE)) == -1)
		return (itest_child_fail("memfd: %s", strerror(errno)));
	/* register 1 */
	p = mmap(NULL, RUN_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return (itest_child_fail("mmap: %s", strerror(errno)));
	if ((rc = child_rewrite(p, RUN_LEN, 0, 0x77, "first map")) != 0)
		return (rc);
	/* unregister 1 */
	if (munmap(p, RUN_LEN) != 0)
		return (itest_child_fail("munmap: %s", strerror(errno)));

	/* register 2 */
	p = mmap(NULL, RUN_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return (itest_child_fail("mmap again: %s", strerror(errno)));
	if ((rc = itest_child_check(p, RUN_LEN, 0x77, "mapped again")) != 0)
		return (rc);
	/* A hole in the middle takes the whole region back: unregister 2. */
	if (munmap(p + 2 * MiB, 2 * MiB) != 0)
		return (itest_child_fail("munmap of a piece: %s", strerror(errno)));
	if ((rc = itest_child_check(p, 2 * MiB, 0x77, "before the hole")) != 0 ||
	    (rc = itest_child_check(p + 4 * MiB, RUN_LEN - 4 * MiB, 0x77,
	    "after the hole")) != 0)
		return (rc);
	/* A misaligned cut fails in the kernel and keeps everything. */
	if (munmap(p + 4 * MiB + 4096, 4096) == 0 || errno != EINVAL)
		return (itest_child_fail("misaligned hugetlb munmap did not fail "
		    "with EINVAL"));
	munmap(p, 2 * MiB);
	munmap(p + 4 * MiB, RUN_LEN - 4 * MiB);

	/* register 3, then a MAP_FIXED over it: unregister 3, register 4 */
	p = mmap(NULL, RUN_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return (itest_child_fail("mmap a third time: %s", strerror(errno)));
	q = mmap(p, RUN_LEN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
	    fd, 0);
	if (q != p)
		return (itest_child_fail("MAP_FIXED over the region: %s",
		    strerror(errno)));
	if ((rc = itest_child_check(p, RUN_LEN, 0x77, "mapped over")) != 0)
		return (rc);

	/* Moved elsewhere: unregister 4; the kernel serves the new place. */
	resv = mmap(NULL, RUN_LEN + 2 * MiB, PROT_NONE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (resv == MAP_FAILED)
		return (itest_child_fail("reserve: %s", strerror(errno)));
	a = ((uintptr_t)resv + 2 * MiB - 1) & ~(uintptr_t)(2 * MiB - 1);
	t = mremap(p, RUN_LEN, RUN_LEN, MREMAP_MAYMOVE | MREMAP_FIXED,
	    (void *)a);
	if (t == MAP_FAILED)
		return (itest_child_fail("mremap: %s", strerror(errno)));
	return (child_rewrite(t, RUN_LEN, 0x77, 0x78, "moved"));
}

/* No daemon: two mappings hpz-run would register; one warning. */
static int
child_nodaemon(void)
{
	int	fd, rc = 0, i;

	for (i = 0; i < 2; i++) {
		if ((fd = child_memfd(8 * MiB, 0)) == -1)
			return (itest_child_fail("memfd: %s", strerror(errno)));
		rc |= child_use(fd, 8 * MiB, MAP_SHARED, 0, 0x12, "shmem");
		close(fd);
	}
	return (rc);
}

/* A libhpz client of its own: hpz-run must not get in its way. */
static int
child_libhpz(void)
{
	struct hpz_region	 r;
	unsigned char		*p;
	int			 fd, error, rc;

	/* hpz_region_create maps inside libhpz: left to the caller. */
	if ((error = hpz_region_create(&r, RUN_LEN, HPZ_PAGE_2M)) != 0)
		return (itest_child_fail("hpz_region_create: %s",
		    hpz_last_error()));
	if ((error = hpz_register(&r)) != 0)
		return (itest_child_fail("hpz_register of a created region: %s",
		    hpz_last_error()));
	if ((rc = itest_child_check(r.addr, RUN_LEN, 0, "created region")) != 0)
		return (rc);
	hpz_region_destroy(&r);

	/* Its own mmap, registered by hpz-run first, then by itself. */
	if ((fd = child_memfd(RUN_LEN, RUN_HUGE)) == -1)
		return (itest_child_fail("memfd: %s", strerror(errno)));
	p = mmap(NULL, RUN_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return (itest_child_fail("mmap: %s", strerror(errno)));
	memset(&r, 0, sizeof(r));
	r.addr = p;
	r.len = RUN_LEN;
	r.fd = fd;
	if ((error = hpz_register(&r)) != 0)
		return (itest_child_fail("hpz_register of its own mapping: %s (%s)",
		    hpz_strerror(error), hpz_last_error()));
	if ((rc = itest_child_check(p, RUN_LEN, 0, "own mapping")) != 0)
		return (rc);
	if ((error = hpz_unregister(&r)) != 0)
		return (itest_child_fail("hpz_unregister: %s", hpz_last_error()));
	munmap(p, RUN_LEN);
	close(fd);
	return (0);
}

/* A forked child does not inherit the region, and registers its own. */
static int
child_fork(void)
{
	unsigned char	*p;
	pid_t		 pid;
	int		 fd, st, rc;

	if ((fd = child_memfd(RUN_LEN, RUN_HUGE)) == -1)
		return (itest_child_fail("memfd: %s", strerror(errno)));
	p = mmap(NULL, RUN_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return (itest_child_fail("mmap: %s", strerror(errno)));
	memset(p, 0x21, RUN_LEN);
	if ((pid = fork()) == -1)
		return (itest_child_fail("fork: %s", strerror(errno)));
	if (pid == 0) {
		/*
		 * The parent's range is not ours (MADV_DONTFORK): unmapping
		 * it must not unregister the parent's region.
		 */
		munmap(p, RUN_LEN);
		close(fd);
		if ((fd = child_memfd(RUN_LEN, RUN_HUGE)) == -1)
			_exit(itest_child_fail("memfd: %s", strerror(errno)));
		_exit(child_use(fd, RUN_LEN, MAP_SHARED, 0, 0x22,
		    "forked child"));
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		return (itest_child_fail("forked child failed (status 0x%x)", st));
	if ((rc = itest_child_check(p, RUN_LEN, 0x21, "parent after fork")) != 0)
		return (rc);
	return (0);
}

__attribute__((constructor))
static void
child_main(void)
{
	static const struct {
		const char	*name;
		int		(*fn)(void);
	} modes[] = {
		{ "fresh", child_fresh },
		{ "file", child_file },
		{ "leave", child_leave },
		{ "small", child_small },
		{ "shmem", child_shmem },
		{ "remap", child_remap },
		{ "nodaemon", child_nodaemon },
		{ "libhpz", child_libhpz },
		{ "fork", child_fork },
	};
	const char	*mode = getenv("HPZ_ITEST_CHILD");
	size_t		 i;

	if (mode == NULL)
		return;
	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		if (strcmp(modes[i].name, mode) == 0) {
			fflush(stdout);
			_exit(modes[i].fn());
		}
	}
	_exit(itest_child_fail("unknown mode %s", mode));
}

/* --- the test: runs hpz-run and reads the daemon ------------------------ */

static const char *
run_builddir(void)
{
	const char	*dir = getenv("HPZ_BUILDDIR");

	cr_assert_not_null(dir, "HPZ_BUILDDIR is not set (run via run.sh)");
	return (dir);
}

/*
 * Run hpz-run with args (RUN_SELF stands for this binary) in an
 * environment changed by env ("NAME=VALUE" sets, "NAME" unsets); collect
 * its output and status.
 */
static void
run_exec(struct itest_out *o, const char *const *env, const char *const *args)
{
	const char	*argv[32];
	char		 self[PATH_MAX], hpzrun[PATH_MAX];
	const char	*dir = run_builddir();
	pid_t		 pid;
	int		 pipefd[2], i;

	itest_self(self, sizeof(self));
	snprintf(hpzrun, sizeof(hpzrun), "%s/client/hpz-run", dir);
	argv[0] = hpzrun;
	for (i = 0; args[i] != NULL && i < 30; i++)
		argv[i + 1] = strcmp(args[i], RUN_SELF) == 0 ? self : args[i];
	argv[i + 1] = NULL;

	cr_assert_eq(pipe2(pipefd, O_CLOEXEC), 0);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		dup2(pipefd[1], STDOUT_FILENO);
		dup2(pipefd[1], STDERR_FILENO);
		unsetenv("HPZ_RUN_MIN");
		unsetenv("HPZ_RUN_FLAGS");
		unsetenv("HPZ_RUN_VERBOSE");
		unsetenv("HPZ_ITEST_CHILD");
		itest_hpzrun_env(dir);
		for (i = 0; env != NULL && env[i] != NULL; i++) {
			const char	*eq = strchr(env[i], '=');
			char		 name[64];

			if (eq == NULL) {
				unsetenv(env[i]);
				continue;
			}
			snprintf(name, sizeof(name), "%.*s",
			    (int)(eq - env[i]), env[i]);
			setenv(name, eq + 1, 1);
		}
		execv(hpzrun, (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", hpzrun, strerror(errno));
		_exit(99);
	}
	close(pipefd[1]);
	itest_collect(o, pipefd[0], pid, RUN_TIMEOUT_S, "hpz-run");
}

/* Run this binary in mode under hpz-run with opts; it must succeed. */
static void
run_child(struct itest_out *o, const char *mode, const char *const *env,
    const char *const *opts)
{
	const char	*args[32], *e[16];
	char		 m[64];
	int		 i, n = 0;

	snprintf(m, sizeof(m), "HPZ_ITEST_CHILD=%s", mode);
	e[n++] = m;
	for (i = 0; env != NULL && env[i] != NULL && n < 15; i++)
		e[n++] = env[i];
	e[n] = NULL;
	for (n = 0; opts[n] != NULL && n < 28; n++)
		args[n] = opts[n];
	args[n++] = "--";
	args[n++] = RUN_SELF;
	args[n] = NULL;
	run_exec(o, e, args);
	cr_assert(WIFEXITED(o->status) && WEXITSTATUS(o->status) == 0,
	    "mode %s: hpz-run exited with status 0x%x; output:\n%s", mode,
	    o->status, o->text);
}

/* Lines of the output that hold needle. */
static int
run_lines(const struct itest_out *o, const char *needle)
{
	const char	*line = o->text, *nl;
	char		 buf[1024];
	size_t		 len;
	int		 n = 0;

	while (*line != '\0') {
		nl = strchr(line, '\n');
		len = nl != NULL ? (size_t)(nl - line) : strlen(line);
		snprintf(buf, sizeof(buf), "%.*s", (int)len, line);
		if (strstr(buf, needle) != NULL)
			n++;
		line += len + (nl != NULL);
	}
	return (n);
}

/* The child has exited: its regions must be gone from the daemon. */
static struct hpz_status
run_settled(const struct hpz_status *before)
{
	struct hpz_status	st;
	int			i;

	for (i = 0; i < 200; i++) {
		st = itest_status();
		if (st.regions == before->regions &&
		    st.bytes_registered == before->bytes_registered)
			break;
		usleep(10 * 1000);
	}
	cr_assert_eq(st.regions, before->regions, "regions: %llu before, "
	    "%llu after the program exited", before->regions, st.regions);
	cr_assert_eq(st.bytes_registered, before->bytes_registered);
	return (st);
}

/* A hugetlb memfd of RUN_LEN the child inherits, filled with v. */
static int
run_filled_memfd(unsigned char v)
{
	void	*p;
	int	 fd;

	itest_need_pages(2048, 2 * (long)(RUN_LEN / (2 * MiB)));
	fd = memfd_create("itest-run-file", RUN_HUGE);
	cr_assert_geq(fd, 0, "memfd_create: %s", strerror(errno));
	cr_assert_eq(ftruncate(fd, (off_t)RUN_LEN), 0);
	p = mmap(NULL, RUN_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert_neq(p, MAP_FAILED, "mmap: %s", strerror(errno));
	memset(p, v, RUN_LEN);
	munmap(p, RUN_LEN);
	return (fd);
}

static void
run_assert_file(int fd, unsigned char v)
{
	size_t	 first, n;
	void	*p;

	p = mmap(NULL, RUN_LEN, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(p, MAP_FAILED, "mmap: %s", strerror(errno));
	n = itest_count_not(p, RUN_LEN, v, &first);
	cr_assert_eq(n, 0, "%zu bytes of the file are not 0x%02x, first at "
	    "%zu", n, v, first);
	munmap(p, RUN_LEN);
}

/* A program's run under hpz-run, and the daemon's counters around it. */
struct run_case {
	struct itest_out		o;
	struct hpz_status	before, st;
};

/*
 * Run mode under hpz-run with opts, once the pool has pages 2 MiB pages
 * free (0: none needed); the counters before and right after.
 */
static void
run_observe(struct run_case *c, const char *mode, const char *const *env,
    const char *const *opts, long pages)
{
	if (pages > 0)
		itest_need_pages(2048, pages);
	c->before = itest_status();
	run_child(&c->o, mode, env, opts);
	c->st = itest_status();
}

/* Exactly n lines of the output hold needle. */
static void
run_expect_lines(const struct itest_out *o, const char *needle, int n)
{
	int	got = run_lines(o, needle);

	cr_assert_eq(got, n, "%d lines hold \"%s\", wanted %d; output:\n%s",
	    got, needle, n, o->text);
}

/* A counter moved by n during the run (0: it did not move). */
#define RUN_MOVED(c, field, n) cr_assert_eq((c).st.field -		\
	(c).before.field, (unsigned long long)(n), "%s moved by %llu, "	\
	"wanted %llu", #field, (c).st.field - (c).before.field,		\
	(unsigned long long)(n))

/*
 * A program given the file fd (filled with fill) that expects to read
 * expect in it, then writes 0x33 there.  That write must reach the file.
 */
static void
run_file(struct run_case *c, unsigned char fill, unsigned char expect,
    const char *const *opts, int settle)
{
	char		 fdenv[32], expenv[32];
	const char	*env[] = { fdenv, expenv, NULL };
	int		 fd;

	fd = run_filled_memfd(fill);
	snprintf(fdenv, sizeof(fdenv), "HPZ_ITEST_FD=%d", fd);
	snprintf(expenv, sizeof(expenv), "HPZ_ITEST_EXPECT=%02x", expect);
	c->before = itest_status();
	run_child(&c->o, "file", env, opts);
	c->st = settle ? itest_status_faults(&c->before, 1) : itest_status();
	RUN_MOVED(*c, registers, 1);
	run_settled(&c->before);
	/* What the child wrote went to the file: it was really mapped. */
	run_assert_file(fd, 0x33);
	close(fd);
}

Test(run, fresh_hugetlb_memfd_is_served)
{
	const char *const	opts[] = { "-v", "-m", "2M", NULL };
	struct run_case		c;

	run_observe(&c, "fresh", NULL, opts, 16);
	run_expect_lines(&c.o, "] registered 32 MiB", 1);
	RUN_MOVED(c, registers, 1);
	/* No garbage: the kernel serves them, no round trip through us. */
	cr_assert_eq(c.st.faults - c.before.faults, 0, "the daemon served "
	    "%llu faults of 16 fresh pages: they are the kernel's",
	    c.st.faults - c.before.faults);
	cr_assert_geq(c.st.intercept_off - c.before.intercept_off, 1);
	run_settled(&c.before);
}

Test(run, discard_reads_zero_over_old_contents)
{
	const char *const	opts[] = { "-f", "discard", "-m", "2M", NULL };
	struct run_case		c;

	run_file(&c, 0xa5, 0x00, opts, 1);
	cr_assert_gt(c.st.faults - c.before.faults +
	    (c.st.bg_pages_premapped - c.before.bg_pages_premapped), 0);
	cr_assert_geq(c.st.pages_cleared - c.before.pages_cleared +
	    c.st.bg_pages_cleared - c.before.bg_pages_cleared, 16,
	    "16 pages of garbage, %llu cleared on fault, %llu in the "
	    "background", c.st.pages_cleared - c.before.pages_cleared,
	    c.st.bg_pages_cleared - c.before.bg_pages_cleared);
}

Test(run, contents_kept_without_discard)
{
	const char *const	opts[] = { "-m", "2M", NULL };
	struct run_case		c;

	run_file(&c, 0xa5, 0xa5, opts, 0);
	/* Data, no garbage: the kernel maps the file's pages itself. */
	cr_assert_eq(c.st.faults - c.before.faults, 0,
	    "%llu faults for 16 data pages: they are the kernel's",
	    c.st.faults - c.before.faults);
	cr_assert_eq(c.st.pages_cleared, c.before.pages_cleared,
	    "data pages were cleared");
}

/* Mappings hpz-run must leave alone: nothing registered, nothing said. */
static void
run_left_alone(const char *mode, const char *min, long pages)
{
	const char *const	opts[] = { "-v", "-m", min, NULL };
	struct run_case		c;

	run_observe(&c, mode, NULL, opts, pages);
	run_expect_lines(&c.o, "hpz-run", 0);
	RUN_MOVED(c, registers, 0);
	RUN_MOVED(c, faults, 0);
	RUN_MOVED(c, requests_rejected, 0);
}

Test(run, private_anonymous_and_readonly_left_alone)
{
	run_left_alone("leave", "2M", 32);
}

Test(run, small_mappings_left_alone)
{
	run_left_alone("small", "4M", 1);
}

Test(run, shmem_above_minimum_is_served)
{
	const char *const	opts[] = { "-v", "-m", "4M", NULL };
	struct run_case		c;

	run_observe(&c, "shmem", NULL, opts, 0);
	run_expect_lines(&c.o, "] registered 8 MiB", 1);
	run_expect_lines(&c.o, "4 KiB pages", 1);
	RUN_MOVED(c, registers, 1);
	cr_assert_eq(c.st.faults - c.before.faults, 0,
	    "fresh shmem: the kernel's");
	cr_assert_geq(c.st.intercept_off - c.before.intercept_off, 1);
	run_settled(&c.before);
}

Test(run, unmap_map_again_map_over_and_move)
{
	const char *const	opts[] = { "-v", "-m", "2M", NULL };
	struct run_case		c;

	run_observe(&c, "remap", NULL, opts, 16);
	run_expect_lines(&c.o, "] registered", 4);
	run_expect_lines(&c.o, "] unregistered", 4);
	run_expect_lines(&c.o, "cannot", 0);
	RUN_MOVED(c, registers, 4);
	RUN_MOVED(c, unregisters, 4);
	/* Nothing garbage: every fault is the kernel's, moves followed. */
	RUN_MOVED(c, faults, 0);
	cr_assert_geq(c.st.intercept_off - c.before.intercept_off, 1);
	run_settled(&c.before);
}

Test(run, unreachable_daemon_warns_once)
{
	const char *const	opts[] = { "-s", "/nonexistent/hpzerod.sock",
	    "-m", "4M", NULL };
	struct run_case		c;

	run_observe(&c, "nodaemon", NULL, opts, 0);
	run_expect_lines(&c.o, "hpz-run", 1);
	run_expect_lines(&c.o, "hpz-run: hpzerod not reachable at "
	    "/nonexistent/hpzerod.sock: ", 1);
	run_expect_lines(&c.o, "; running without it", 1);
	RUN_MOVED(c, registers, 0);
}

Test(run, libhpz_client_is_not_disturbed)
{
	const char *const	opts[] = { "-v", "-m", "2M", NULL };
	struct run_case		c;

	run_observe(&c, "libhpz", NULL, opts, 16);
	/* Only its own mmap was ours, and only until it registered it. */
	run_expect_lines(&c.o, "] registered", 1);
	run_expect_lines(&c.o, "] unregistered", 1);
	RUN_MOVED(c, registers, 3);
	RUN_MOVED(c, unregisters, 3);
	RUN_MOVED(c, requests_rejected, 0);
	run_settled(&c.before);
}

Test(run, forked_child_registers_its_own)
{
	const char *const	opts[] = { "-v", "-m", "2M", NULL };
	struct run_case		c;

	run_observe(&c, "fork", NULL, opts, 32);
	c.st = itest_status_faults(&c.before, 32);
	run_expect_lines(&c.o, "] registered", 2);
	run_expect_lines(&c.o, "cannot", 0);
	RUN_MOVED(c, registers, 2);
	RUN_MOVED(c, requests_rejected, 0);
	run_settled(&c.before);
}

/* Whether prog is on $PATH. */
static int
run_have(const char *prog)
{
	const char	*path = getenv("PATH"), *p, *q;
	char		 buf[PATH_MAX];

	if (path == NULL)
		return (0);
	for (p = path; ; p = q + 1) {
		q = strchr(p, ':');
		snprintf(buf, sizeof(buf), "%.*s/%s", q != NULL ?
		    (int)(q - p) : (int)strlen(p), p, prog);
		if (access(buf, X_OK) == 0)
			return (1);
		if (q == NULL)
			return (0);
	}
}

/*
 * A real VM monitor: QEMU maps a hugetlb memfd backend MAP_SHARED when
 * share=on (registered) and MAP_PRIVATE when share=off (left alone).  It
 * runs under sh, so the preload library also reaches a grandchild.
 */
Test(run, qemu_guest_ram_is_registered)
{
	const char *const	on[] = { "-v", "--", "sh", "-c", "echo quit | "
	    "exec qemu-system-x86_64 -accel tcg -m 64M -object "
	    "memory-backend-memfd,id=m,size=64M,hugetlb=on,hugetlbsize=2M,"
	    "share=on -machine pc,memory-backend=m -nodefaults -S "
	    "-monitor stdio -display none -serial none", NULL };
	const char *const	off[] = { "-v", "--", "sh", "-c", "echo quit | "
	    "exec qemu-system-x86_64 -accel tcg -m 64M -object "
	    "memory-backend-memfd,id=m,size=64M,hugetlb=on,hugetlbsize=2M,"
	    "share=off -machine pc,memory-backend=m -nodefaults -S "
	    "-monitor stdio -display none -serial none", NULL };
	struct hpz_status	before, st;
	struct itest_out		o;

	if (!run_have("qemu-system-x86_64"))
		cr_skip_test("qemu-system-x86_64 is not installed");
	itest_need_pages(2048, 32);
	before = itest_status();
	run_exec(&o, NULL, on);
	cr_assert(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0,
	    "qemu: status 0x%x:\n%s", o.status, o.text);
	cr_assert_eq(run_lines(&o, "] registered 64 MiB"), 1, "%s", o.text);
	cr_assert_eq(run_lines(&o, "2048 KiB pages"), 1, "%s", o.text);
	st = run_settled(&before);
	cr_assert_eq(st.registers - before.registers, 1);

	run_exec(&o, NULL, off);
	cr_assert(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0,
	    "qemu: status 0x%x:\n%s", o.status, o.text);
	cr_assert_eq(run_lines(&o, "hpz-run"), 0, "%s", o.text);
	st = itest_status();
	cr_assert_eq(st.registers - before.registers, 1);
}

Test(run, command_line)
{
	const char *const	none[] = { NULL };
	const char *const	badflag[] = { "-f", "discard,bogus", "true",
	    NULL };
	const char *const	badenv[] = { "HPZ_RUN_FLAGS=premap,nope",
	    NULL };
	const char *const	badsize[] = { "-m", "12Q", "true", NULL };
	const char *const	badopt[] = { "-X", "true", NULL };
	const char *const	help[] = { "-h", NULL };
	const char *const	noprog[] = { "--", "/nonexistent/prog", NULL };
	const char *const	nolib[] = { "HPZ_PRELOAD=/nonexistent.so",
	    NULL };
	const char *const	ok[] = { "true", NULL };
	const char *const	show[] = { "-v", "-m", "2M", "-f",
	    "discard,premap", "-s", "rel.sock", "--", "sh", "-c",
	    "echo \"[$LD_PRELOAD|$HPZ_RUN_MIN|$HPZ_RUN_FLAGS|"
	    "$HPZ_RUN_VERBOSE|$HPZ_SOCKET]\"", NULL };
	char			want[PATH_MAX * 3], cwd[PATH_MAX];
	char			pre[PATH_MAX * 2];
	const char *const	keep[] = { pre, NULL };
	int			n;
	struct itest_out		o;

#define RUN_EXIT(o, code) cr_assert(WIFEXITED((o).status) &&		\
	WEXITSTATUS((o).status) == (code), "status 0x%x, wanted exit %d:\n%s",\
	(o).status, (code), (o).text)

	run_exec(&o, NULL, none);
	RUN_EXIT(o, 2);
	cr_assert_eq(run_lines(&o, "no program"), 1, "%s", o.text);
	run_exec(&o, NULL, badflag);
	RUN_EXIT(o, 2);
	cr_assert_eq(run_lines(&o, "unknown flag 'bogus' (valid: discard, "
	    "ahead, onfault, eager, premap, nopremap, noscrub, nopool, none)"), 1, "%s",
	    o.text);
	run_exec(&o, badenv, ok);
	RUN_EXIT(o, 2);
	cr_assert_eq(run_lines(&o, "HPZ_RUN_FLAGS: unknown flag 'nope'"), 1,
	    "%s", o.text);
	run_exec(&o, NULL, badsize);
	RUN_EXIT(o, 2);
	run_exec(&o, NULL, badopt);
	RUN_EXIT(o, 2);
	run_exec(&o, NULL, help);
	RUN_EXIT(o, 0);
	cr_assert_eq(run_lines(&o, "usage: hpz-run"), 1, "%s", o.text);
	run_exec(&o, NULL, noprog);
	RUN_EXIT(o, 127);
	run_exec(&o, nolib, ok);
	RUN_EXIT(o, 127);
	cr_assert_eq(run_lines(&o, "preload library /nonexistent.so"), 1,
	    "%s", o.text);
	run_exec(&o, NULL, ok);
	RUN_EXIT(o, 0);
	cr_assert_eq(o.len, 0, "hpz-run true printed:\n%s", o.text);

	/* What the program sees; LD_PRELOAD already set is kept, after. */
	cr_assert_not_null(getcwd(cwd, sizeof(cwd)));
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s/lib/.libs/libhpz.so.0",
	    run_builddir());
	n = snprintf(want, sizeof(want), "[%s/client/.libs/libhpz-preload.so:"
	    "%s|2097152|discard,premap|1|%s/rel.sock]", run_builddir(),
	    pre + strlen("LD_PRELOAD="), cwd);
	cr_assert_lt(n, (int)sizeof(want));
	run_exec(&o, keep, show);
	RUN_EXIT(o, 0);
	cr_assert_eq(run_lines(&o, want), 1, "wanted %s, got:\n%s", want,
	    o.text);
	/* Already there (hpz-run under hpz-run): not twice. */
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s/client/.libs/"
	    "libhpz-preload.so", run_builddir());
	snprintf(want, sizeof(want), "[%s|2097152|", pre +
	    strlen("LD_PRELOAD="));
	run_exec(&o, keep, show);
	RUN_EXIT(o, 0);
	cr_assert_eq(run_lines(&o, want), 1, "wanted %s, got:\n%s", want,
	    o.text);
#undef RUN_EXIT
}
