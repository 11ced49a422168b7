/*
 * fuse-mute.c - a FUSE server for the tests that does not answer: it
 * serves one regular file, DIR/file, and leaves chosen requests waiting
 * for ever, so that whoever makes them (the daemon closing a stray fd,
 * fstat of a passed file) blocks inside the kernel as long as the test
 * wants.
 *
 * usage: fuse-mute MODE DIR [SIZE]
 *   MODE  answer           answers everything (a baseline)
 *         noflush          answers everything except FLUSH (sent on every
 *                          close of a descriptor of the file): close hangs
 *         mute-after-open  answers until the file has been opened once,
 *                          then nothing (getattr, read, flush all hang)
 *   DIR   an empty directory; mounted allow_other, so other users and
 *         the daemon see it
 *   SIZE  the file's size in bytes (default 1 MiB); it reads as zeros and
 *         takes writes, which it forgets
 *
 * It prints "ready CONN" on stdout once mounted (CONN: the number under
 * /sys/fs/fuse/connections), then serves until SIGTERM, SIGINT or SIGHUP,
 * when it aborts the connection (every request waiting on it fails with
 * ENOTCONN: no process stays stuck), unmounts DIR (lazily: the test's own
 * descriptors may still be open) and exits 0.  If it dies another way the
 * kernel aborts the connection when the last /dev/fuse descriptor closes,
 * and only the mount is left behind (umount -l DIR).  Exit status 77: no
 * /dev/fuse or no right to mount (the caller skips); 2: usage or set-up.
 *
 * The raw /dev/fuse protocol rather than libfuse: the test needs to choose
 * per request whether an answer ever goes out, which is a one-line test
 * here and a fight with the library's session and thread model there; it
 * needs no configure check or extra package (linux/fuse.h is in the
 * kernel headers), and as root mount(2) needs no fusermount helper.  The
 * handful of requests a file open, read, stat and close make is all it
 * has to know; anything else gets ENOSYS.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MUTE_ROOT	FUSE_ROOT_ID
#define MUTE_FILE	2
#define MUTE_NAME	"file"
#define MUTE_BUF	(1024 * 1024 + 4096)
#define MUTE_CTL	"/sys/fs/fuse/connections"

enum mute_mode { MUTE_ANSWER, MUTE_NOFLUSH, MUTE_AFTER_OPEN };

static enum mute_mode mode;
static uint64_t file_size = 1024 * 1024;
static const char *dir;
static unsigned int conn;
static int devfd = -1;
static volatile int muted;	/* mute-after-open, once opened */

static void
mute_reply(uint64_t unique, int error, const void *arg, size_t len)
{
	struct fuse_out_header oh;
	struct iovec iov[2];
	ssize_t n;

	oh.len = sizeof(oh) + (error ? 0 : len);
	oh.error = error ? -error : 0;
	oh.unique = unique;
	iov[0].iov_base = &oh;
	iov[0].iov_len = sizeof(oh);
	iov[1].iov_base = (void *)arg;
	iov[1].iov_len = error ? 0 : len;
	n = writev(devfd, iov, error || len == 0 ? 1 : 2);
	/* ENOENT: the request was interrupted and is gone; fine. */
	if (n < 0 && errno != ENOENT && errno != ENODEV)
		fprintf(stderr, "fuse-mute: reply: %s\n", strerror(errno));
}

static void
mute_attr(uint64_t node, struct fuse_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->ino = node;
	a->nlink = node == MUTE_ROOT ? 2 : 1;
	if (node == MUTE_ROOT) {
		a->mode = S_IFDIR | 0755;
	} else {
		a->mode = S_IFREG | 0666;
		a->size = file_size;
		a->blocks = (file_size + 511) / 512;
	}
	a->blksize = 4096;
	a->atime = a->mtime = a->ctime = (uint64_t)time(NULL);
}

static void
mute_init(uint64_t unique, const struct fuse_init_in *in)
{
	struct fuse_init_out out;

	memset(&out, 0, sizeof(out));
	out.major = FUSE_KERNEL_VERSION;
	out.minor = FUSE_KERNEL_MINOR_VERSION;
	if (in->major != FUSE_KERNEL_VERSION) {
		/* Tell it our major; it answers with another INIT. */
		mute_reply(unique, 0, &out, sizeof(out));
		return;
	}
	out.max_readahead = in->max_readahead;
	out.max_write = 128 * 1024;
	out.max_background = 16;
	out.congestion_threshold = 12;
	out.time_gran = 1;
	mute_reply(unique, 0, &out, sizeof(out));
}

/* One request: answer it, or not. */
static void
mute_serve(const char *buf, size_t len)
{
	const struct fuse_in_header *ih = (const void *)buf;
	const char *arg = buf + sizeof(*ih);
	size_t alen = len - sizeof(*ih);

	switch (ih->opcode) {
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_INTERRUPT:
		return;		/* never answered */
	case FUSE_INIT:
		if (alen < 8)
			mute_reply(ih->unique, EINVAL, NULL, 0);
		else
			mute_init(ih->unique, (const void *)arg);
		return;
	}
	if (muted)
		return;		/* mute-after-open: nothing more, ever */

	switch (ih->opcode) {
	case FUSE_LOOKUP: {
		struct fuse_entry_out e;

		if (ih->nodeid != MUTE_ROOT || alen < sizeof(MUTE_NAME) ||
		    strcmp(arg, MUTE_NAME) != 0) {
			mute_reply(ih->unique, ENOENT, NULL, 0);
			return;
		}
		memset(&e, 0, sizeof(e));
		e.nodeid = MUTE_FILE;
		e.generation = 1;
		e.entry_valid = e.attr_valid = 1;
		mute_attr(MUTE_FILE, &e.attr);
		mute_reply(ih->unique, 0, &e, sizeof(e));
		return;
	}
	case FUSE_GETATTR:
	case FUSE_SETATTR: {
		struct fuse_attr_out a;

		memset(&a, 0, sizeof(a));
		a.attr_valid = 1;
		mute_attr(ih->nodeid, &a.attr);
		mute_reply(ih->unique, 0, &a, sizeof(a));
		return;
	}
	case FUSE_OPEN:
	case FUSE_OPENDIR: {
		struct fuse_open_out o;

		memset(&o, 0, sizeof(o));
		o.fh = ih->nodeid;
		mute_reply(ih->unique, 0, &o, sizeof(o));
		if (ih->opcode == FUSE_OPEN && mode == MUTE_AFTER_OPEN)
			muted = 1;
		return;
	}
	case FUSE_READ: {
		const struct fuse_read_in *r = (const void *)arg;
		static char zeros[128 * 1024];
		uint64_t n = 0;

		if (r->offset < file_size)
			n = file_size - r->offset;
		if (n > r->size)
			n = r->size;
		if (n > sizeof(zeros))
			n = sizeof(zeros);
		mute_reply(ih->unique, 0, zeros, n);
		return;
	}
	case FUSE_WRITE: {
		const struct fuse_write_in *w = (const void *)arg;
		struct fuse_write_out o;

		memset(&o, 0, sizeof(o));
		o.size = w->size;
		mute_reply(ih->unique, 0, &o, sizeof(o));
		return;
	}
	case FUSE_FLUSH:
		if (mode == MUTE_NOFLUSH)
			return;		/* the close waits for ever */
		mute_reply(ih->unique, 0, NULL, 0);
		return;
	case FUSE_READDIR:
		mute_reply(ih->unique, 0, NULL, 0);	/* empty */
		return;
	case FUSE_STATFS: {
		struct fuse_statfs_out s;

		memset(&s, 0, sizeof(s));
		s.st.bsize = s.st.frsize = 4096;
		s.st.namelen = 255;
		mute_reply(ih->unique, 0, &s, sizeof(s));
		return;
	}
	case FUSE_RELEASE:
	case FUSE_RELEASEDIR:
	case FUSE_FSYNC:
	case FUSE_FSYNCDIR:
	case FUSE_ACCESS:
		mute_reply(ih->unique, 0, NULL, 0);
		return;
	default:
		mute_reply(ih->unique, ENOSYS, NULL, 0);
		return;
	}
}

/* Fail every waiter, then take the mount away. */
static void
mute_abort(void)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), MUTE_CTL "/%u/abort", conn);
	fd = open(path, O_WRONLY);
	if (fd >= 0) {
		if (write(fd, "1", 1) < 0)
			fprintf(stderr, "fuse-mute: %s: %s\n", path,
			    strerror(errno));
		close(fd);
	}
	/*
	 * Without fusectl the exit below aborts it: the last /dev/fuse
	 * descriptor's release aborts the connection.
	 */
	if (umount2(dir, MNT_DETACH) < 0)
		fprintf(stderr, "fuse-mute: umount %s: %s\n", dir,
		    strerror(errno));
}

/* Serve until the mount goes away (unmounted or aborted). */
static void *
mute_loop(void *arg)
{
	char *buf = arg;
	ssize_t n;

	for (;;) {
		n = read(devfd, buf, MUTE_BUF);
		if (n < 0) {
			if (errno == EINTR || errno == ENOENT ||
			    errno == EAGAIN)
				continue;
			if (errno != ENODEV)
				fprintf(stderr, "fuse-mute: read: %s\n",
				    strerror(errno));
			break;
		}
		if ((size_t)n < sizeof(struct fuse_in_header))
			continue;
		mute_serve(buf, (size_t)n);
	}
	umount2(dir, MNT_DETACH);
	_exit(0);
}

/* fusectl, for the abort file: mount it if nobody has. */
static void
mute_fusectl(void)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), MUTE_CTL "/%u", conn);
	if (stat(path, &st) == 0)
		return;
	if (mount("fusectl", MUTE_CTL, "fusectl", 0, NULL) < 0)
		fprintf(stderr, "fuse-mute: mount fusectl: %s (an exit "
		    "still aborts the connection)\n", strerror(errno));
}

int
main(int argc, char **argv)
{
	static sigset_t set;
	pthread_t t;
	struct stat st;
	char opts[128], *buf;
	int sig;

	if (argc < 3 || argc > 4)
		goto usage;
	if (strcmp(argv[1], "answer") == 0)
		mode = MUTE_ANSWER;
	else if (strcmp(argv[1], "noflush") == 0)
		mode = MUTE_NOFLUSH;
	else if (strcmp(argv[1], "mute-after-open") == 0)
		mode = MUTE_AFTER_OPEN;
	else
		goto usage;
	dir = argv[2];
	if (argc == 4)
		file_size = strtoull(argv[3], NULL, 0);

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	devfd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (devfd < 0) {
		fprintf(stderr, "fuse-mute: /dev/fuse: %s\n", strerror(errno));
		return 77;
	}
	snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=%u,"
	    "group_id=%u,allow_other", devfd, getuid(), getgid());
	if (mount("fuse-mute", dir, "fuse.fuse-mute", MS_NOSUID | MS_NODEV,
	    opts) < 0) {
		fprintf(stderr, "fuse-mute: mount %s: %s\n", dir,
		    strerror(errno));
		return errno == EPERM ? 77 : 2;
	}
	/*
	 * Serve from now on: the first request after mount(2) is INIT, and
	 * until it is answered even stat of the root waits.
	 */
	buf = malloc(MUTE_BUF);
	if (buf == NULL || pthread_create(&t, NULL, mute_loop, buf) != 0) {
		umount2(dir, MNT_DETACH);
		return 2;
	}
	/* The connection's number is the mount's device (major 0). */
	if (stat(dir, &st) < 0) {
		fprintf(stderr, "fuse-mute: stat %s: %s\n", dir,
		    strerror(errno));
		umount2(dir, MNT_DETACH);
		return 2;
	}
	conn = minor(st.st_dev);
	mute_fusectl();
	printf("ready %u\n", conn);
	fflush(stdout);

	sigwait(&set, &sig);
	mute_abort();
	return 0;

usage:
	fprintf(stderr, "usage: fuse-mute answer|noflush|mute-after-open "
	    "DIR [SIZE]\n");
	return 2;
}
