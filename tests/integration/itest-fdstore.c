/*
 * itest-fdstore.c - a daemon killed with SIGKILL comes back with its regions
 * from the fd store.  The test plays systemd's part: it is the notify
 * socket, keeps the descriptors sent with FDSTORE=1 under their FDNAME,
 * forgets them on FDSTOREREMOVE, and starts the next daemon with them as
 * LISTEN_FDS/LISTEN_FDNAMES.  (tests/systemd/nspawn.sh does the same
 * under a real systemd.)
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <linux/userfaultfd.h>

#include <criterion/criterion.h>

#include "itest.h"
#include "hpz-state.h"

#define FS_MAX		32
#define FS_PAGES	8
#define FS_PAGE		(2 * MiB)

struct fs_entry {
	char	name[64];
	int	fd;
};

struct fs {
	char		dir[64];
	char		sock[96];
	char		notify[96];
	char		conf[96];	/* settings file, "" for none */
	char		log[96];	/* the daemons' stderr, "" for ours */
	int		nfd;
	pid_t		pid;
	struct fs_entry	e[FS_MAX];
	int		n;
	int		ready;
};

static void
fs_remove(struct fs *s, const char *name)
{
	int	i;

	for (i = 0; i < s->n; i++) {
		if (strcmp(s->e[i].name, name) != 0)
			continue;
		close(s->e[i].fd);
		s->e[i] = s->e[--s->n];
		i--;
	}
}

/* Take one notify datagram, acting on FDSTORE/FDSTOREREMOVE/READY. */
static int
fs_recv(struct fs *s, int timeout_ms)
{
	struct pollfd	 pfd = { .fd = s->nfd, .events = POLLIN };
	struct msghdr	 mh;
	struct iovec	 iov;
	struct cmsghdr	*c;
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * 8)];
	}		 cm;
	char		 buf[1024], name[64], *p;
	int		 fds[8], nfds = 0, i, store, rm;
	ssize_t		 n;

	if (poll(&pfd, 1, timeout_ms) != 1)
		return (0);
	memset(&mh, 0, sizeof(mh));
	iov.iov_base = buf;
	iov.iov_len = sizeof(buf) - 1;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = sizeof(cm.buf);
	n = recvmsg(s->nfd, &mh, MSG_CMSG_CLOEXEC);
	if (n <= 0)
		return (0);
	buf[n] = '\0';
	for (c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			for (i = 0; i < (int)((c->cmsg_len - CMSG_LEN(0)) /
			    sizeof(int)) && nfds < 8; i++)
				memcpy(&fds[nfds++], CMSG_DATA(c) +
				    i * sizeof(int), sizeof(int));
	store = strstr(buf, "FDSTORE=1") != NULL;
	rm = strstr(buf, "FDSTOREREMOVE=1") != NULL;
	name[0] = '\0';
	if ((p = strstr(buf, "FDNAME=")) != NULL)
		sscanf(p + 7, "%63[^\n]", name);
	if (strstr(buf, "READY=1") != NULL)
		s->ready = 1;
	for (i = 0; i < nfds; i++) {
		if (store && !rm && s->n < FS_MAX) {
			snprintf(s->e[s->n].name, sizeof(s->e[0].name), "%s",
			    name);
			s->e[s->n++].fd = fds[i];
		} else
			close(fds[i]);
	}
	if (rm)
		fs_remove(s, name);
	return (1);
}

/* Take datagrams until the store holds want fds (or time runs out). */
static void
fs_until(struct fs *s, int want, int ready)
{
	struct timespec	t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (s->n == want && (!ready || s->ready))
			return;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20)
			return;
		fs_recv(s, 200);
	}
}

/* Start hpzerod with the stored fds passed as systemd passes them. */
static void
fs_start(struct fs *s)
{
	char	names[FS_MAX * 64], num[32];
	int	i, fd;

	s->ready = 0;
	s->pid = fork();
	cr_assert_geq(s->pid, 0);
	if (s->pid != 0)
		return;
	/* A failed assertion ends the test process: the daemon with it. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Out of the way of 3.., then into place. */
	for (i = 0; i < s->n; i++)
		if ((s->e[i].fd = fcntl(s->e[i].fd, F_DUPFD, 100)) == -1)
			_exit(120);
	names[0] = '\0';
	for (i = 0; i < s->n; i++) {
		if ((fd = dup2(s->e[i].fd, 3 + i)) != 3 + i)
			_exit(121);
		fcntl(fd, F_SETFD, 0);
		if (i > 0)
			strcat(names, ":");
		strcat(names, s->e[i].name);
	}
	if (s->n > 0) {
		snprintf(num, sizeof(num), "%d", (int)getpid());
		setenv("LISTEN_PID", num, 1);
		snprintf(num, sizeof(num), "%d", s->n);
		setenv("LISTEN_FDS", num, 1);
		setenv("LISTEN_FDNAMES", names, 1);
	}
	setenv("NOTIFY_SOCKET", s->notify, 1);
	if (s->log[0] != '\0' && (fd = open(s->log, O_WRONLY | O_CREAT |
	    O_APPEND | O_CLOEXEC, 0644)) >= 0)
		dup2(fd, 2);
	if (s->conf[0] != '\0')
		execl(itest_daemon_path(), "hpzerod", "--workers", "2",
		    "--socket", s->sock, "--config", s->conf, "--pool", "off",
		    (char *)NULL);
	else
		execl(itest_daemon_path(), "hpzerod", "--workers", "2",
		    "--socket", s->sock, "--pool", "off", (char *)NULL);
	_exit(122);
}

static void
fs_setup(struct fs *s)
{
	struct sockaddr_un	sun;

	memset(s, 0, sizeof(*s));
	strcpy(s->dir, "/tmp/hpz-fs.XXXXXX");
	cr_assert_not_null(mkdtemp(s->dir));
	snprintf(s->sock, sizeof(s->sock), "%s/hpzerod.sock", s->dir);
	snprintf(s->notify, sizeof(s->notify), "%s/notify", s->dir);
	itest_sun(&sun, s->notify);
	s->nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(s->nfd, 0);
	cr_assert_eq(bind(s->nfd, (struct sockaddr *)&sun, sizeof(sun)), 0);
}

static void
fs_teardown(struct fs *s)
{
	int	status;

	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		waitpid(s->pid, &status, 0);
	}
	while (s->n > 0)
		fs_remove(s, s->e[0].name);
	close(s->nfd);
	unlink(s->notify);
	unlink(s->sock);
	if (s->conf[0] != '\0')
		unlink(s->conf);
	if (s->log[0] != '\0')
		unlink(s->log);
	rmdir(s->dir);
}

/* The client's pattern for page i. */
static unsigned char
fs_byte(int i)
{
	return ((unsigned char)(0x51 + i));
}

/*
 * The client: half its pages data, half reset to garbage.  Tells the
 * parent (byte on wfd) when set up, waits for the go (byte on rfd), then
 * touches every page: garbage must read zero, data must be intact.  Exit
 * status: 0 right, 1 a stale byte, 2 lost data, 3 set-up failed.
 */
static int
fs_client(int wfd, int rfd)
{
	struct hpz_region	r, half;
	struct timespec		t0, t1;
	char			c;
	size_t			first;
	double			ms, max = 0;
	int			i;

	if (hpz_region_create(&r, FS_PAGES * FS_PAGE, HPZ_PAGE_2M) != 0)
		return (3);
	/* Garbage stays garbage until a fault: the new daemon must clear. */
	r.flags |= HPZ_NO_SCRUB;
	if (hpz_register(&r) != 0) {
		fprintf(stderr, "fdstore client: %s\n", hpz_last_error());
		return (3);
	}
	for (i = 0; i < FS_PAGES; i++)
		memset((char *)r.addr + (size_t)i * FS_PAGE, fs_byte(i),
		    FS_PAGE);
	half = r;
	half.addr = (char *)r.addr + (FS_PAGES / 2) * FS_PAGE;
	half.len = (FS_PAGES / 2) * FS_PAGE;
	if (hpz_reset(&half) != 0) {
		fprintf(stderr, "fdstore client: reset: %s\n",
		    hpz_last_error());
		return (3);
	}
	(void)write(wfd, "r", 1);
	if (read(rfd, &c, 1) != 1)
		return (3);
	for (i = 0; i < FS_PAGES; i++) {
		char	*p = (char *)r.addr + (size_t)i * FS_PAGE;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		(void)*(volatile char *)p;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
		    (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
		if (ms > max)
			max = ms;
		if (i >= FS_PAGES / 2 &&
		    itest_count_nonzero(p, FS_PAGE, &first) != 0) {
			fprintf(stderr, "fdstore client: page %d: stale byte "
			    "at %zu\n", i, first);
			return (1);
		}
		if (i < FS_PAGES / 2 &&
		    itest_count_not(p, FS_PAGE, fs_byte(i), &first) != 0) {
			fprintf(stderr, "fdstore client: page %d: data lost "
			    "at %zu\n", i, first);
			return (2);
		}
	}
	printf("fdstore: after SIGKILL and restart, the slowest first touch "
	    "took %.2f ms\n", max);
	fflush(stdout);
	return (0);
}

Test(fdstore, sigkill_and_restart_takes_regions_back, .timeout = 120)
{
	struct fs		 s;
	struct hpz_region_info	 info[4];
	size_t			 count = 0;
	char			 c, names[4];
	int			 up[2], go[2], i, status, nkinds;
	pid_t			 client;

	itest_need_pages(2048, FS_PAGES);
	fs_setup(&s);
	fs_start(&s);
	fs_until(&s, 0, 1);
	cr_assert(s.ready, "the first daemon sent no READY=1");

	cr_assert_eq(pipe(up), 0);
	cr_assert_eq(pipe(go), 0);
	client = fork();
	cr_assert_geq(client, 0);
	if (client == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		setenv("HPZ_SOCKET", s.sock, 1);
		/* Nothing but the fd store may rescue this client. */
		setenv("HPZ_FALLBACK_MS", "600000", 1);
		_exit(fs_client(up[1], go[0]));
	}
	cr_assert_eq(read(up[0], &c, 1), 1, "the client did not set up");

	/* One region: its uffd, file, state and pidfd are in the store. */
	fs_until(&s, 4, 0);
	cr_assert_eq(s.n, 4, "%d fds in the store, expected 4", s.n);
	nkinds = 0;
	for (i = 0; i < s.n; i++) {
		names[i] = s.e[i].name[strlen(s.e[i].name) - 1];
		cr_assert(strncmp(s.e[i].name, "hpz-r", 5) == 0, "name %s",
		    s.e[i].name);
		nkinds += strchr("ufsp", names[i]) != NULL;
	}
	cr_assert_eq(nkinds, 4);

	kill(s.pid, SIGKILL);
	cr_assert_eq(waitpid(s.pid, &status, 0), s.pid);
	s.pid = 0;

	fs_start(&s);
	fs_until(&s, 4, 1);
	cr_assert(s.ready, "the restarted daemon sent no READY=1");
	setenv("HPZ_SOCKET", s.sock, 1);
	cr_assert_eq(hpz_list_regions(info, 4, &count), 0, "%s",
	    hpz_last_error());
	cr_assert_eq(count, 1, "the restarted daemon has %zu regions", count);
	cr_assert_eq(info[0].len, FS_PAGES * FS_PAGE);

	cr_assert_eq(write(go[1], "g", 1), 1);
	cr_assert_eq(waitpid(client, &status, 0), client);
	cr_assert(WIFEXITED(status), "client status 0x%x", status);
	cr_assert_eq(WEXITSTATUS(status), 0, "client: %s",
	    WEXITSTATUS(status) == 1 ? "a stale byte" : WEXITSTATUS(status) ==
	    2 ? "data lost" : "set-up failed");

	/* The client is gone: the daemon empties the store. */
	fs_until(&s, 0, 0);
	cr_assert_eq(s.n, 0, "%d fds left in the store after the client "
	    "exited", s.n);
	cr_assert_eq(hpz_list_regions(info, 4, &count), 0);
	cr_assert_eq(count, 0, "region still listed after its client exited");
	close(up[0]);
	close(up[1]);
	close(go[0]);
	close(go[1]);
	fs_teardown(&s);
}

/*
 * Fork a client of s's daemon: it dies with the test, and nothing but the
 * fd store may rescue it.  0 in the child, its pid in the parent.
 */
static pid_t
fs_fork_client(const struct fs *s)
{
	pid_t	pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		setenv("HPZ_SOCKET", s->sock, 1);
		setenv("HPZ_FALLBACK_MS", "600000", 1);
	}
	return (pid);
}

/* r: the first len bytes of file fd, mapped shared, with flags. */
static int
fs_map(struct hpz_region *r, int fd, size_t len, unsigned int flags)
{
	memset(r, 0, sizeof(*r));
	r->len = len;
	r->fd = fd;
	r->flags = flags;
	r->addr = mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
	    0);
	return (r->addr == MAP_FAILED ? -1 : 0);
}

/*
 * A client that exits while no daemon runs: the next daemon finds its
 * pidfd dead, drops the garbage pages from the file (a later user of the
 * file must not read them) and empties the store.
 */
Test(fdstore, client_gone_while_daemon_down, .timeout = 120)
{
	struct fs		 s;
	struct hpz_region_info	 info[4];
	struct hpz_region	 r, half;
	size_t			 count = 9, first;
	char			 c;
	int			 up[2], fd, status, i;
	pid_t			 client;
	void			*map;

	itest_need_pages(2048, FS_PAGES);
	/* A file that outlives both: we hold it. */
	fd = memfd_create("hpz-fs", MFD_CLOEXEC | MFD_HUGETLB);
	cr_assert_geq(fd, 0, "memfd_create: %s", strerror(errno));
	cr_assert_eq(ftruncate(fd, FS_PAGES * FS_PAGE), 0);
	fs_setup(&s);
	fs_start(&s);
	fs_until(&s, 0, 1);
	cr_assert(s.ready);

	cr_assert_eq(pipe(up), 0);
	if ((client = fs_fork_client(&s)) == 0) {
		/* HPZ_NO_SCRUB: the garbage is still there. */
		if (fs_map(&r, fd, FS_PAGES * FS_PAGE, HPZ_NO_SCRUB) != 0 ||
		    hpz_register(&r) != 0)
			_exit(3);
		for (i = 0; i < FS_PAGES; i++)
			memset((char *)r.addr + (size_t)i * FS_PAGE,
			    fs_byte(i), FS_PAGE);
		half = r;
		half.addr = (char *)r.addr + (FS_PAGES / 2) * FS_PAGE;
		half.len = (FS_PAGES / 2) * FS_PAGE;
		if (hpz_reset(&half) != 0)
			_exit(3);
		(void)write(up[1], "r", 1);
		pause();
		_exit(0);
	}
	cr_assert_eq(read(up[0], &c, 1), 1, "the client did not set up");
	fs_until(&s, 4, 0);
	cr_assert_eq(s.n, 4);

	/* Daemon and client die; the file (and its garbage) stays. */
	kill(s.pid, SIGKILL);
	waitpid(s.pid, &status, 0);
	kill(client, SIGKILL);
	waitpid(client, &status, 0);

	fs_start(&s);
	fs_until(&s, 0, 1);
	cr_assert(s.ready, "the restarted daemon sent no READY=1");
	cr_assert_eq(s.n, 0, "%d fds left in the store", s.n);
	setenv("HPZ_SOCKET", s.sock, 1);
	cr_assert_eq(hpz_list_regions(info, 4, &count), 0);
	cr_assert_eq(count, 0);

	/* Whoever maps the file now sees data or zeros, never garbage. */
	map = mmap(NULL, FS_PAGES * FS_PAGE, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(map, MAP_FAILED);
	for (i = 0; i < FS_PAGES; i++) {
		char	*p = (char *)map + (size_t)i * FS_PAGE;

		if (i < FS_PAGES / 2)
			cr_assert_eq(itest_count_not(p, FS_PAGE, fs_byte(i),
			    &first), 0, "page %d: data lost at %zu", i, first);
		else
			cr_assert_eq(itest_count_nonzero(p, FS_PAGE, &first),
			    0, "page %d: garbage left at %zu", i, first);
	}
	munmap(map, FS_PAGES * FS_PAGE);
	close(fd);
	close(up[0]);
	close(up[1]);
	fs_teardown(&s);
}

/* ---- the store distrusts what it finds ----------------------------------- */

/* The stored fd of region id, kind k, or -1. */
static int
fs_fd(struct fs *s, uint64_t id, char k)
{
	char	name[64];
	int	i;

	snprintf(name, sizeof(name), "hpz-r%llu-%c", (unsigned long long)id,
	    k);
	for (i = 0; i < s->n; i++)
		if (strcmp(s->e[i].name, name) == 0)
			return (s->e[i].fd);
	return (-1);
}

/* Does the store hold anything of region id? */
static int
fs_has(struct fs *s, uint64_t id)
{
	return (fs_fd(s, id, 'u') != -1 || fs_fd(s, id, 'f') != -1 ||
	    fs_fd(s, id, 's') != -1 || fs_fd(s, id, 'p') != -1);
}

/* Put fd (a copy) in the store under name, as a daemon would have. */
static void
fs_add(struct fs *s, const char *name, int fd)
{
	cr_assert_lt(s->n, FS_MAX);
	snprintf(s->e[s->n].name, sizeof(s->e[0].name), "%s", name);
	s->e[s->n].fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	cr_assert_geq(s->e[s->n].fd, 0);
	s->n++;
}

/* Did a daemon log a line holding what? */
static int
fs_logged(struct fs *s, const char *what)
{
	char	 line[1024];
	FILE	*f;
	int	 found = 0;

	if ((f = fopen(s->log, "r")) == NULL)
		return (0);
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = strstr(line, what) != NULL;
	fclose(f);
	return (found);
}

static void
fs_setup_logged(struct fs *s, const char *conf)
{
	FILE	*f;

	fs_setup(s);
	snprintf(s->log, sizeof(s->log), "%s/hpzerod.log", s->dir);
	if (conf != NULL) {
		snprintf(s->conf, sizeof(s->conf), "%s/hpzerod.conf", s->dir);
		cr_assert_not_null(f = fopen(s->conf, "w"));
		fputs(conf, f);
		fclose(f);
	}
}

/* The parent's side of a client in a child: up, wait for go, exit code. */
struct fs_child {
	pid_t	pid;
	int	up[2];
	int	go[2];
};

static void
fs_child_start(struct fs *s, struct fs_child *k, int (*fn)(int, int))
{
	char	c;

	cr_assert_eq(pipe(k->up), 0);
	cr_assert_eq(pipe(k->go), 0);
	k->pid = fork();
	cr_assert_geq(k->pid, 0);
	if (k->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		setenv("HPZ_SOCKET", s->sock, 1);
		/* Nothing but a daemon may serve this client. */
		setenv("HPZ_FALLBACK_MS", "600000", 1);
		_exit(fn(k->up[1], k->go[0]));
	}
	/* Only the child writes up and reads go: its death is an EOF. */
	close(k->up[1]);
	close(k->go[0]);
	k->up[1] = k->go[0] = -1;
	cr_assert_eq(read(k->up[0], &c, 1), 1, "the client did not set up");
}

/* Say go, and the client's verdict: 0, or what it wrote to stderr. */
static void
fs_child_finish(struct fs_child *k)
{
	int	status;

	cr_assert_eq(write(k->go[1], "g", 1), 1);
	cr_assert_eq(waitpid(k->pid, &status, 0), k->pid);
	cr_assert(WIFEXITED(status), "client status 0x%x", status);
	cr_assert_eq(WEXITSTATUS(status), 0, "client: %s",
	    WEXITSTATUS(status) == 1 ? "a stale byte" :
	    WEXITSTATUS(status) == 2 ? "data lost" :
	    WEXITSTATUS(status) == 4 ? "a request failed" : "set-up failed");
	close(k->up[0]);
	close(k->go[1]);
}

/* A daemon with the fd store (conf: its settings, or NULL), ready. */
static void
fs_up(struct fs *s, const char *conf)
{
	fs_setup_logged(s, conf);
	fs_start(s);
	fs_until(s, 0, 1);
	cr_assert(s->ready, "the first daemon sent no READY=1");
}

/* SIGKILL the daemon (its fd store stays), then start the next one. */
static void
fs_kill(struct fs *s)
{
	int	status;

	kill(s->pid, SIGKILL);
	cr_assert_eq(waitpid(s->pid, &status, 0), s->pid);
	s->pid = 0;
}

static void
fs_restart(struct fs *s, int want)
{
	fs_start(s);
	fs_until(s, want, 1);
	cr_assert(s->ready, "the restarted daemon sent no READY=1");
}

/* The client's verdict; once it is gone the store empties. */
static void
fs_down(struct fs *s, struct fs_child *k)
{
	fs_child_finish(k);
	fs_until(s, 0, 0);
	fs_teardown(s);
}

/* In a client: a reset of a succeeds, and a then reads zero. */
static int
fs_reset_clean(struct hpz_region *a, size_t len, const char *when)
{
	size_t	first;
	int	error;

	if ((error = hpz_reset(a)) != 0) {
		fprintf(stderr, "fdstore client: reset %s: %d (%s)\n", when,
		    error, hpz_last_error());
		return (4);
	}
	if (itest_count_nonzero(a->addr, len, &first) != 0) {
		fprintf(stderr, "fdstore client: stale byte at %zu (%s)\n",
		    first, when);
		return (1);
	}
	return (0);
}

/* Half data (page i holds fs_byte(i)), half reset to garbage. */
static int
fs_half_garbage(struct hpz_region *r, size_t len, unsigned int page)
{
	struct hpz_region	half;
	size_t			pg = page == HPZ_PAGE_2M ? FS_PAGE : 4096;
	size_t			i;

	if (hpz_region_create(r, len, page) != 0)
		return (3);
	r->flags |= HPZ_NO_SCRUB;
	if (hpz_register(r) != 0) {
		fprintf(stderr, "fdstore client: %s\n", hpz_last_error());
		return (3);
	}
	for (i = 0; i < len / pg; i++)
		memset((char *)r->addr + i * pg, fs_byte((int)i), pg);
	half = *r;
	half.addr = (char *)r->addr + len / 2;
	half.len = len / 2;
	if (hpz_reset(&half) != 0) {
		fprintf(stderr, "fdstore client: reset: %s\n",
		    hpz_last_error());
		return (3);
	}
	return (0);
}

/* Every page as fs_half_garbage left it: data, or zero. */
static int
fs_half_check(const struct hpz_region *r, size_t pg, const char *name)
{
	size_t	i, first, n = r->len / pg;

	for (i = 0; i < n; i++) {
		char	*p = (char *)r->addr + i * pg;

		if (i >= n / 2 && itest_count_nonzero(p, pg, &first) != 0) {
			fprintf(stderr, "fdstore client: %s page %zu: stale "
			    "byte at %zu\n", name, i, first);
			return (1);
		}
		if (i < n / 2 && itest_count_not(p, pg, fs_byte((int)i),
		    &first) != 0) {
			fprintf(stderr, "fdstore client: %s page %zu: data "
			    "lost at %zu\n", name, i, first);
			return (2);
		}
	}
	return (0);
}

static int
fs_two_regions_client(int wfd, int rfd)
{
	struct hpz_region	a, b;
	struct hpz_status	st;
	char			c;
	int			rc;

	if ((rc = fs_half_garbage(&a, 4 * FS_PAGE, HPZ_PAGE_2M)) != 0 ||
	    (rc = fs_half_garbage(&b, 4 * FS_PAGE, HPZ_PAGE_2M)) != 0)
		return (rc);
	(void)write(wfd, "r", 1);
	if (read(rfd, &c, 1) != 1)
		return (3);
	/* A request: libhpz registers both again first (or lets go). */
	if (hpz_status(&st) != 0) {
		fprintf(stderr, "fdstore client: status: %s\n",
		    hpz_last_error());
		return (4);
	}
	if ((rc = fs_half_check(&a, FS_PAGE, "a")) != 0 ||
	    (rc = fs_half_check(&b, FS_PAGE, "b")) != 0)
		return (rc);
	return (0);
}

/*
 * A stored region whose state header was corrupted (its range moved past
 * the end of its file) while the daemon was down: the next daemon gets
 * ready, takes the other region back, drops the bad entry from the store
 * with a log line, and does not act on the lying header (on which it
 * would mark garbage kept and hand the range to the kernel unpunched).
 */
Test(fdstore, corrupted_header_entry_dropped, .timeout = 120)
{
	struct fs		s;
	struct fs_child		k;
	struct hpz_state_header	h;
	int			sfd;

	itest_need_pages(2048, 8);
	fs_up(&s, NULL);
	fs_child_start(&s, &k, fs_two_regions_client);
	fs_until(&s, 8, 0);
	cr_assert_eq(s.n, 8, "%d fds in the store, expected 8", s.n);
	cr_assert(fs_has(&s, 1) && fs_has(&s, 2), "not regions 1 and 2");

	fs_kill(&s);
	sfd = fs_fd(&s, 2, 's');
	cr_assert_geq(sfd, 0);
	cr_assert_eq(pread(sfd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	cr_assert_eq(h.magic, HPZ_STATE_MAGIC);
	h.offset += 1ULL << 40;
	cr_assert_eq(pwrite(sfd, &h, sizeof(h), 0), (ssize_t)sizeof(h));

	fs_restart(&s, 4);
	cr_assert(fs_has(&s, 1), "the good region left the store");
	cr_assert(!fs_has(&s, 2), "the bad entry is still in the store");
	cr_assert(fs_logged(&s, "stored region 2: not taken back"),
	    "no log line about the bad entry");
	fs_down(&s, &k);
}

static int
fs_one_region_client(int wfd, int rfd)
{
	struct hpz_region	a;
	struct hpz_status	st;
	char			c;
	int			rc;

	if ((rc = fs_half_garbage(&a, 4 * FS_PAGE, HPZ_PAGE_2M)) != 0)
		return (rc);
	(void)write(wfd, "r", 1);
	if (read(rfd, &c, 1) != 1)
		return (3);
	if (hpz_status(&st) != 0)
		return (4);
	return (fs_half_check(&a, FS_PAGE, "a"));
}

/*
 * An entry whose state memfd was grown (not sealed against it, 1 GiB of
 * holes, its header agreeing) comes back after a SIGKILL: the daemon gets
 * ready, serves the real region, drops the entry with a log line, and
 * never walks (or allocates, reading holes) what was grown.
 */
Test(fdstore, grown_state_memfd_entry_dropped, .timeout = 120)
{
	struct fs		s;
	struct fs_child		k;
	struct hpz_state_header	h;
	struct stat		sb;
	uint64_t		grown = 1ULL << 30;
	int			sfd, ffd;

	itest_need_pages(2048, 4);
	fs_up(&s, NULL);
	fs_child_start(&s, &k, fs_one_region_client);
	fs_until(&s, 4, 0);
	cr_assert_eq(s.n, 4);

	fs_kill(&s);
	/* Region 900: a state grown to 1 GiB, and a file for it. */
	sfd = memfd_create("hpz-state", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ffd = memfd_create("hpz-grown-file", MFD_CLOEXEC);
	cr_assert(sfd >= 0 && ffd >= 0);
	cr_assert_eq(ftruncate(ffd, 1 << 20), 0);
	cr_assert_eq(ftruncate(sfd, (off_t)grown), 0);
	cr_assert_eq(fcntl(sfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	memset(&h, 0, sizeof(h));
	h.magic = HPZ_STATE_MAGIC;
	h.version = HPZ_STATE_VERSION;
	h.page_size = 4096;
	h.npages = grown - HPZ_STATE_PAGES_OFF;
	h.len = h.npages * 4096;
	cr_assert_eq(pwrite(sfd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	fs_add(&s, "hpz-r900-s", sfd);
	fs_add(&s, "hpz-r900-f", ffd);

	fs_restart(&s, 4);
	cr_assert(!fs_has(&s, 900), "the grown entry is still in the store");
	cr_assert(fs_has(&s, 1), "the real region left the store");
	cr_assert(fs_logged(&s, "stored region 900: not taken back"),
	    "no log line about the grown entry");
	/* What the daemon read of it, it allocated: nothing but the header. */
	cr_assert_eq(fstat(sfd, &sb), 0);
	cr_assert_leq((uint64_t)sb.st_blocks * 512, 64 * 4096,
	    "the daemon walked the grown state: %llu KiB of it allocated",
	    (unsigned long long)sb.st_blocks / 2);
	close(sfd);
	close(ffd);
	fs_down(&s, &k);
}

static int
fs_limits_client(int wfd, int rfd)
{
	struct hpz_region	a;
	char			c;
	int			rc;

	/* 12 MiB of the uid's 16M. */
	if (hpz_region_create(&a, 6 * FS_PAGE, HPZ_PAGE_2M) != 0 ||
	    hpz_register(&a) != 0) {
		fprintf(stderr, "fdstore client: %s\n", hpz_last_error());
		return (3);
	}
	memset(a.addr, 0x77, a.len);
	(void)write(wfd, "r", 1);
	if (read(rfd, &c, 1) != 1)
		return (3);
	/* After the restart: the same region, counted once. */
	if ((rc = fs_reset_clean(&a, a.len, "after the restart")) != 0)
		return (rc);
	hpz_region_destroy(&a);
	return (0);
}

/*
 * [limits] bytes = 16M with 12 MiB registered, SIGKILL, restart: the
 * region back from the fd store is the one the client registers again,
 * counted once, so the client's reset afterwards succeeds.
 */
/* Up, a client in, SIGKILL, the restart takes its region back, done. */
static void
fs_kill_restart(const char *conf, int (*client)(int, int))
{
	struct fs		s;
	struct fs_child		k;

	fs_up(&s, conf);
	fs_child_start(&s, &k, client);
	fs_until(&s, 4, 0);
	cr_assert_eq(s.n, 4);
	fs_kill(&s);
	fs_restart(&s, 4);
	fs_down(&s, &k);
}

Test(fdstore, limits_kill_reset, .timeout = 120)
{
	itest_need_pages(2048, 6);
	fs_kill_restart("[limits]\nbytes = 16M\n", fs_limits_client);
}

static int
fs_mremap_client(int wfd, int rfd)
{
	struct hpz_region	 a;
	void			*to;
	char			 c;
	size_t			 first, len = 512 * 4096;
	int			 error, rc;

	if (hpz_region_create(&a, len, HPZ_PAGE_SHMEM) != 0 ||
	    hpz_register(&a) != 0)
		return (3);
	memset(a.addr, 0x31, len);
	to = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (to == MAP_FAILED || mremap(a.addr, len, len, MREMAP_MAYMOVE |
	    MREMAP_FIXED, to) != to)
		return (3);
	a.addr = to;
	if ((rc = fs_reset_clean(&a, len, "after mremap")) != 0)
		return (rc);
	memset(a.addr, 0x42, len);
	(void)write(wfd, "r", 1);
	if (read(rfd, &c, 1) != 1)
		return (3);
	/* After the restart: taken back where it lies now. */
	if ((rc = fs_reset_clean(&a, len, "after the restart")) != 0)
		return (rc);
	memset(a.addr, 0x53, len);
	if ((error = hpz_unregister(&a)) != 0) {
		fprintf(stderr, "fdstore client: unregister: %d (%s)\n", error,
		    hpz_last_error());
		return (4);
	}
	if (itest_count_not(a.addr, len, 0x53, &first) != 0)
		return (2);
	hpz_region_destroy(&a);
	return (0);
}

/*
 * A region moved whole with mremap, reset there, then the daemon killed
 * and restarted with the fd store: it comes back where it lies now, and
 * the client's reset and unregister there succeed.
 */
Test(fdstore, mremap_then_sigkill_restart, .timeout = 120)
{
	fs_kill_restart(NULL, fs_mremap_client);
}

/* ---- a stored region's release never holds up another client ------------- */

#define FS_HOLD_LEN	(4 * MiB)	/* the attacker's shmem region */
#define FS_HONEST_MS	4000		/* the honest client's rounds, at least */
#define FS_BOUND_MS	5000		/* a round this late is stalled */

/* One honest round, as the honest client reports it: 0 a round, -1 failed. */
struct fs_round {
	int	status;
	char	why[160];
};

/*
 * The honest client: rounds of a fresh 64-page shmem region registered
 * HPZ_DISCARD (whose page state the daemon fills with garbage off the
 * loop, as it works through a stored region's release), touched, checked
 * zero, unregistered; each round reported on wfd, until told to stop
 * (a byte on rfd) once it has run FS_HONEST_MS.
 */
static int
fs_honest(int wfd, int rfd)
{
	struct pollfd		 pfd = { .fd = rfd, .events = POLLIN };
	struct fs_round		 rep;
	struct hpz_region	 r;
	size_t			 first;
	int			 i;

	for (;;) {
		memset(&rep, 0, sizeof(rep));
		if (hpz_region_create(&r, 64 * 4096, HPZ_PAGE_SHMEM) != 0) {
			snprintf(rep.why, sizeof(rep.why), "create: %s",
			    hpz_last_error());
			goto fail;
		}
		for (i = 0; i < 64; i++)
			((char *)r.addr)[i * 4096 + 9] = (char)(i + 1);
		r.flags = HPZ_DISCARD;
		if (hpz_register(&r) != 0) {
			snprintf(rep.why, sizeof(rep.why), "register: %s",
			    hpz_last_error());
			goto fail;
		}
		if (itest_count_nonzero(r.addr, r.len, &first) != 0) {
			snprintf(rep.why, sizeof(rep.why), "a discarded "
			    "region: stale byte at %zu", first);
			goto fail;
		}
		if (hpz_unregister(&r) != 0) {
			snprintf(rep.why, sizeof(rep.why), "unregister: %s",
			    hpz_last_error());
			goto fail;
		}
		hpz_region_destroy(&r);
		if (write(wfd, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
			return (4);
		if (poll(&pfd, 1, 0) == 1)
			return (0);
	}
fail:
	rep.status = -1;
	(void)write(wfd, &rep, sizeof(rep));
	return (1);
}

/*
 * The lock holder: pwrite()s into file fd from a buffer of its own that
 * lies in a range registered on a userfaultfd it never serves.  shmem's
 * write path takes the file's inode lock, then faults on the buffer, and
 * waits there, lock held, until this process is killed.  A byte on wfd
 * just before.
 */
static void
fs_hold_inode_lock(int fd, int wfd)
{
	struct uffdio_api	 api = { .api = UFFD_API };
	struct uffdio_register	 reg;
	char			*buf;
	int			 uffd;

	buf = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	if (buf == MAP_FAILED || uffd < 0 || ioctl(uffd, UFFDIO_API, &api) ==
	    -1)
		_exit(7);
	memset(&reg, 0, sizeof(reg));
	reg.range.start = (uintptr_t)buf;
	reg.range.len = 4096;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if (ioctl(uffd, UFFDIO_REGISTER, &reg) == -1)
		_exit(8);
	(void)write(wfd, "h", 1);
	(void)pwrite(fd, buf, 1, 0);
	_exit(9);
}

/*
 * Wait up to bound ms for fd to be readable, reading the notify socket
 * meanwhile as systemd does (a daemon whose notify messages are not read
 * waits in sendmsg).  1 readable, 0 not within the bound.
 */
static int
fs_wait_readable(struct fs *s, int fd, int bound)
{
	struct pollfd	pfd[2];
	double		end = itest_now_us() / 1e3 + bound, left;

	for (;;) {
		left = end - itest_now_us() / 1e3;
		if (left <= 0)
			return (0);
		pfd[0].fd = fd;
		pfd[0].events = POLLIN;
		pfd[1].fd = s->nfd;
		pfd[1].events = POLLIN;
		if (poll(pfd, 2, (int)left + 1) <= 0)
			continue;
		if (pfd[1].revents & POLLIN)
			(void)fs_recv(s, 0);
		if (pfd[0].revents & (POLLIN | POLLHUP))
			return (1);
	}
}

/*
 * A stored region not taken back after a restart (its client exited while
 * no daemon ran) has its garbage cleared in its file.  Another process
 * holds that file's inode lock meanwhile, as long as it likes.  Whatever
 * of the release waits on it must wait where only that region's work
 * waits (the context of the uid that owns it, shown stuck in status):
 * another client's discard registers, whose page state the daemon
 * prepares off the loop, keep being answered, and the daemon's measure of
 * what a fault costs is taken.  Once the holder lets go (or at once, the
 * clear through a mapping needing no inode lock on shmem), the file holds
 * no garbage.
 */
Test(fdstore, release_under_a_held_inode_lock, .timeout = 180)
{
	struct fs		 s;
	struct hpz_status	 st;
	struct hpz_region	 r;
	struct fs_round		 rep;
	char			 c, *map;
	double			 t0, last, t, longest = 0;
	size_t			 first;
	int			 up[2], hp[2], rp[2], gp[2], fd, status, rounds = 0;
	int			 bound = FS_BOUND_MS * itest_wait_scale(), stuck;
	pid_t			 client, holder, honest;
	unsigned long long	 dpid;

	fd = memfd_create("hpz-fs-held", MFD_CLOEXEC);
	cr_assert_geq(fd, 0, "memfd_create: %s", strerror(errno));
	cr_assert_eq(ftruncate(fd, FS_HOLD_LEN), 0);
	fs_setup(&s);
	fs_start(&s);
	fs_until(&s, 0, 1);
	cr_assert(s.ready, "the first daemon sent no READY=1");

	/* The client: its whole file garbage, left for the daemon to drop. */
	cr_assert_eq(pipe(up), 0);
	if ((client = fs_fork_client(&s)) == 0) {
		if (fs_map(&r, fd, FS_HOLD_LEN, HPZ_DISCARD | HPZ_NO_SCRUB) != 0)
			_exit(3);
		memset(r.addr, 0xa7, r.len);
		if (hpz_register(&r) != 0)
			_exit(3);
		(void)write(up[1], "r", 1);
		pause();
		_exit(0);
	}
	cr_assert_eq(read(up[0], &c, 1), 1, "the client did not set up");
	fs_until(&s, 4, 0);
	cr_assert_eq(s.n, 4, "%d fds in the store, expected 4", s.n);

	/* Another process takes the file's inode lock and keeps it. */
	cr_assert_eq(pipe(hp), 0);
	holder = fork();
	cr_assert_geq(holder, 0);
	if (holder == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		fs_hold_inode_lock(fd, hp[1]);
	}
	cr_assert_eq(read(hp[0], &c, 1), 1, "the lock holder did not start");
	usleep(200 * 1000);	/* its write is in, the lock held */

	/* Daemon and client die; the restarted daemon must drop the garbage. */
	kill(s.pid, SIGKILL);
	waitpid(s.pid, &status, 0);
	kill(client, SIGKILL);
	waitpid(client, &status, 0);
	fs_start(&s);
	fs_until(&s, 0, 1);
	cr_assert(s.ready, "the restarted daemon sent no READY=1");
	dpid = itest_daemon_start(s.pid);
	setenv("HPZ_SOCKET", s.sock, 1);

	/* The honest client beside the stuck release. */
	cr_assert_eq(pipe(rp), 0);
	cr_assert_eq(pipe(gp), 0);
	honest = fork();
	cr_assert_geq(honest, 0);
	if (honest == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(rp[0]);
		_exit(fs_honest(rp[1], gp[0]));
	}
	close(rp[1]);
	t0 = last = itest_now_us() / 1e3;
	for (;;) {
		if (!fs_wait_readable(&s, rp[0], bound)) {
			kill(honest, SIGKILL);
			kill(holder, SIGKILL);
			cr_assert_fail("the honest client got no answer for %d "
			    "ms (%d rounds done before) while a stored "
			    "region's release waited on a lock another process "
			    "holds", bound, rounds);
		}
		if (read(rp[0], &rep, sizeof(rep)) != (ssize_t)sizeof(rep)) {
			kill(holder, SIGKILL);
			cr_assert_fail("the honest client died (%d rounds)",
			    rounds);
		}
		if (rep.status < 0) {
			kill(holder, SIGKILL);
			cr_assert_fail("honest client: %s", rep.why);
		}
		t = itest_now_us() / 1e3;
		if (t - last > longest)
			longest = t - last;
		last = t;
		rounds++;
		if (t - t0 >= FS_HONEST_MS)
			break;
	}
	cr_assert_eq(write(gp[1], "s", 1), 1);
	while (fs_wait_readable(&s, rp[0], bound) &&
	    read(rp[0], &rep, sizeof(rep)) == (ssize_t)sizeof(rep))
		;
	cr_assert_eq(waitpid(honest, &status, 0), honest);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "the honest client failed (status 0x%x)", status);

	/* Still held: the release's context is stuck, and shown. */
	cr_assert_eq(hpz_status(&st), 0, "%s", hpz_last_error());
	stuck = (int)st.contexts_stuck;
	printf("fdstore: beside a release stuck on an inode lock: %d honest "
	    "discard rounds in %.1f s, longest %.1f ms; status: %llu "
	    "contexts, %llu stuck, the longest pid %lld for %llu ms in %s\n",
	    rounds, (itest_now_us() / 1e3 - t0) / 1e3, longest, st.contexts,
	    st.contexts_stuck, (long long)st.context_stuck_pid,
	    st.context_stuck_ms, st.context_stuck_what);
	fflush(stdout);
	/*
	 * The release clears the garbage in place through a mapping, which
	 * on shmem needs no inode lock: it may be done already.  If not, it
	 * waits on the lock, and its context is shown stuck.
	 */
	if (stuck == 0) {
		map = mmap(NULL, FS_HOLD_LEN, PROT_READ, MAP_SHARED, fd, 0);
		cr_assert_neq(map, MAP_FAILED);
		cr_expect_eq(itest_count_nonzero(map, FS_HOLD_LEN, &first), 0,
		    "no stuck context shown, and the garbage is still in the "
		    "file (byte %zu) while the lock is held", first);
		munmap(map, FS_HOLD_LEN);
	}
	/*
	 * The daemon's own start-up work goes on too: its measure of what a
	 * fault costs here (which every client's policy reads) is taken off
	 * the loop, and must not queue behind the stuck punch.
	 */
	t0 = itest_now_us() / 1e3;
	while (st.cost_rt_ns == 0) {
		cr_assert_lt(itest_now_us() / 1e3 - t0, (double)bound,
		    "the restarted daemon has not measured what a fault costs "
		    "after %d ms more, while a stored region's release waited "
		    "on a lock another process holds", bound);
		usleep(50 * 1000);
		cr_assert_eq(hpz_status(&st), 0, "%s", hpz_last_error());
	}

	/* Let go: the release goes through, and the file holds no garbage. */
	kill(holder, SIGKILL);
	waitpid(holder, &status, 0);
	map = mmap(NULL, FS_HOLD_LEN, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(map, MAP_FAILED);
	t0 = itest_now_us() / 1e3;
	while (itest_count_nonzero(map, FS_HOLD_LEN, &first) != 0) {
		cr_assert_lt(itest_now_us() / 1e3 - t0, 10000.0 *
		    itest_wait_scale(), "the garbage is still in the file "
		    "(byte %zu) 10 s after the lock holder let go", first);
		usleep(20 * 1000);
	}
	munmap(map, FS_HOLD_LEN);
	cr_assert_eq(kill(s.pid, 0), 0, "the daemon died");
	cr_assert_eq(itest_daemon_start(s.pid), dpid,
	    "pid %d is another process now", (int)s.pid);
	close(fd);
	close(up[0]);
	close(up[1]);
	close(hp[0]);
	close(hp[1]);
	close(rp[0]);
	close(gp[0]);
	close(gp[1]);
	fs_teardown(&s);
}
