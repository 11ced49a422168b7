/*
 * fuzz-proto.c - libFuzzer target for the wire protocol: the decoder
 * (proto_validate) and the session dispatcher (control_message) of hpzerod.
 *
 * Byte 0 of an input says what runs (FUZZ_* below; neither part bit: both).
 * Decoder: byte 1 is the fd count (mod 71), the rest is one message.
 * Session: the rest is records, each a 16-bit little-endian word (low 13
 * bits: length; high 3 bits: the fds that go with it, FDS_*) and then that
 * many bytes (fewer at the end of the input), read by one client in order:
 * handed to control_message() as proto_recv() would have, or (FUZZ_WIRE)
 * sent over the socket and read with proto_recv() itself, or (FUZZ_LOOP)
 * sent to a connection the daemon's own event loop accepted and serves.
 * A record that starts with "HZFA" is no message but a hostile client's
 * actions (FUZZ_ACTION_*, 3 bytes each) while its faults are served by the
 * daemon's real workers: page-state bytes and header bytes overwritten,
 * pages of the real mapping touched and dropped; every fault on a
 * registered page must be answered in FUZZ_SERVE_MS whatever the state
 * says.  Every invariant broken calls fuzz_fail(), which aborts.
 *
 * Build with -DHPZ_FUZZ_STANDALONE for a main() that replays files (or
 * directories of them) without libFuzzer, e.g. with gcc.
 */
#include <dirent.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <linux/userfaultfd.h>

#include <event2/event.h>

#include "hpz.h"
#include "hpz-protocol.h"
#include "hpz-state.h"

#include "bucket.h"
#include "clear.h"
#include "conf.h"
#include "control-client.h"
#include "control-limits.h"
#include "control-socket.h"
#include "control.h"
#include "globals.h"
#include "log.h"
#include "region-life.h"
#include "region.h"
#include "scrub.h"
#include "stats.h"
#include "worker.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_ASAN	1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define FUZZ_ASAN	1
#endif
#ifdef FUZZ_ASAN
#include <sanitizer/asan_interface.h>
#define FUZZ_POISON(p, n)	__asan_poison_memory_region((p), (n))
#define FUZZ_UNPOISON(p, n)	__asan_unpoison_memory_region((p), (n))
#else
#define FUZZ_POISON(p, n)	((void)(p), (void)(n))
#define FUZZ_UNPOISON(p, n)	((void)(p), (void)(n))
#endif

/* Byte 0 of an input. */
#define FUZZ_DECODER	0x01	/* run the decoder part */
#define FUZZ_SESSION	0x02	/* run the session part */
#define FUZZ_REAL_UFFD	0x04	/* register a real userfaultfd and shmem */
#define FUZZ_RAW	0x08	/* real uffd: leave addresses and fields be */
#define FUZZ_PEER_GONE	0x10	/* the peer has closed: replies fail */
#define FUZZ_LIMITS	0x20	/* per uid: 2 regions, FUZZ_LIMIT_PAGES pages */
#define FUZZ_WIRE	0x40	/* through the socket and proto_recv */
#define FUZZ_LOOP	0x80	/* through the daemon's own event loop */

/* What goes with a session record (the top 3 bits of its length word). */
enum fuzz_fds {
	FDS_DEFAULT,		/* register: uffd and backing; else none */
	FDS_NONE,
	FDS_UFFD,		/* the uffd alone */
	FDS_FAKE,		/* an eventfd and an empty memfd */
	FDS_SWAPPED,		/* backing, then uffd */
	FDS_NOT_FILE,		/* uffd and an eventfd as backing */
	FDS_READ_ONLY,		/* uffd and the backing opened read-only */
	FDS_FLOOD,		/* uffd, backing and 64 more (MSG_CTRUNC) */
};
#define FUZZ_LEN_MASK	0x1fff
#define FUZZ_FDS_SHIFT	13

/* The shmem the real uffd covers, in pages. */
#define FUZZ_MAP_PAGES	16
/* The per-uid byte limit of FUZZ_LIMITS, in pages. */
#define FUZZ_LIMIT_PAGES	6
/* FDS_FLOOD: fds past the two kept, more than proto_recv has room for. */
#define FUZZ_FLOOD	64
#define FUZZ_CMSG_FDS	64	/* proto.c's PROTO_CMSG_FDS */
/* The most bytes a record sends (13 bits of length). */
#define FUZZ_WIRE_MAX	(FUZZ_LEN_MASK + 1)

/* An action record: its magic, then ops of 3 bytes (FUZZ_ACTION_*). */
#define FUZZ_ACTION_MAGIC	"HZFA"
#define FUZZ_ACTION_OPS		128
enum fuzz_action {
	FUZZ_ACTION_STATE,	/* page byte b of region (c >> 2) at page a */
	FUZZ_ACTION_HEADER,	/* header byte a of region (c >> 2) := b */
	FUZZ_ACTION_TOUCH,	/* page a of the mapping: read (b odd), write */
	FUZZ_ACTION_DROP,	/* page a of the mapping: MADV_DONTNEED */
};
/* A fault on a registered page is answered within this, or it hangs. */
#define FUZZ_SERVE_MS		5000


struct fuzz_session {
	struct client	 c;
	int		 peer;		/* the client's end, -1 when closed */
	int		 uffd;		/* real mode, else -1 */
	int		 memfd;
	char		*map;
	uint64_t	 maplen;
	uint64_t	 features;	/* UFFDIO_API agreed */
	uint64_t	 ioctls;	/* UFFDIO_REGISTER offered */
	int		 made[HPZ_REGISTER_NFDS];	/* fds we passed */
};

static FILE		*fuzz_err;	/* the real stderr */
static int		 fuzz_have_uffd;
static uint64_t		 fuzz_page;
static uint64_t		 fuzz_client_id;
static struct hpz_msg	 fuzz_msg;	/* global: its tail can be poisoned */
static struct hpz_msg	 fuzz_rep;
static uint8_t		 fuzz_wire_buf[FUZZ_WIRE_MAX];
static struct sockaddr_un fuzz_sun;	/* FUZZ_LOOP: the daemon listens */
static socklen_t	 fuzz_sunlen;	/* 0: no FUZZ_LOOP */

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void	fuzz_fail(const char *, ...)
		    __attribute__((format(printf, 1, 2), noreturn));
static void	fuzz_start_threads(void);

/* An invariant is broken: say which and abort, so libFuzzer keeps the input. */
static void
fuzz_fail(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	fprintf(fuzz_err, "fuzz-proto: invariant broken: ");
	vfprintf(fuzz_err, fmt, ap);
	fprintf(fuzz_err, "\n");
	va_end(ap);
	fflush(fuzz_err);
	abort();
}

/* A new userfaultfd however this kernel allows it, or -1. */
static int
fuzz_userfaultfd(void)
{
	int	fd;

	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
#ifdef UFFD_USER_MODE_ONLY
	if (fd == -1)
		fd = (int)syscall(SYS_userfaultfd,
		    O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
#endif
#ifdef USERFAULTFD_IOC_NEW
	if (fd == -1) {
		int	dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);

		if (dev != -1) {
			fd = ioctl(dev, USERFAULTFD_IOC_NEW,
			    O_CLOEXEC | O_NONBLOCK);
			close(dev);
		}
	}
#endif
	return (fd);
}

/*
 * The daemon's listening socket for FUZZ_LOOP, in the abstract namespace
 * so that nothing is left in the filesystem; served by control_accept_cb.
 */
static void
fuzz_listen(void)
{
	int	fd;

	memset(&fuzz_sun, 0, sizeof(fuzz_sun));
	fuzz_sun.sun_family = AF_UNIX;
	snprintf(fuzz_sun.sun_path + 1, sizeof(fuzz_sun.sun_path) - 1,
	    "hpz-fuzz-%d", (int)getpid());
	fuzz_sunlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
	    strlen(fuzz_sun.sun_path + 1));
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd == -1 || bind(fd, (struct sockaddr *)&fuzz_sun,
	    fuzz_sunlen) == -1 || listen(fd, 16) == -1 ||
	    control_init(fd) == -1) {
		fprintf(fuzz_err, "fuzz-proto: cannot listen (%s): loop "
		    "inputs run as plain sessions\n", strerror(errno));
		if (fd != -1)
			close(fd);
		fuzz_sunlen = 0;
	}
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char	*v = getenv("HPZ_FUZZ_VERBOSE");
	FILE		*null;
	int		 fd;

	(void)argc;
	(void)argv;
	fuzz_err = stderr;
	/*
	 * Every refusal is logged to stderr, which would drown libFuzzer's
	 * output and slow it down; glibc's stderr is a plain variable, and
	 * libFuzzer and the sanitizers keep writing to fd 2.
	 */
	if ((v == NULL || *v == '\0' || *v == '0') &&
	    (null = fopen("/dev/null", "w")) != NULL)
		stderr = null;
	log_init(v != NULL && *v != '\0' && *v != '0');
	fuzz_page = (uint64_t)sysconf(_SC_PAGESIZE);
	hpzd_start_ns = stats_now_ns();
	if ((hpzd_base = event_base_new()) == NULL)
		fuzz_fail("event_base_new failed");
	/* As the daemon does at start: not in the first input that registers. */
	region_tend_init();
	fuzz_start_threads();
	if ((fd = fuzz_userfaultfd()) != -1) {
		fuzz_have_uffd = 1;
		close(fd);
	} else
		fprintf(fuzz_err, "fuzz-proto: no userfaultfd (%s): real-uffd "
		    "inputs run with fake descriptors\n", strerror(errno));
	fuzz_listen();
	return (0);
}

/*
 * The toucher thread may meet SIGBUS (the daemon may poison a page it
 * cannot back: the kernel's answer too).  Installed before the daemon's
 * own handler (clear.c), which hands it every SIGBUS not its own.
 */
static __thread sigjmp_buf	 fuzz_jb;
static __thread volatile int	 fuzz_armed;
static struct sigaction		 fuzz_old_bus;

static void
fuzz_sigbus(int sig, siginfo_t *si, void *uc)
{
	(void)si;
	(void)uc;
	if (fuzz_armed) {
		fuzz_armed = 0;
		siglongjmp(fuzz_jb, 1);
	}
	sigaction(SIGBUS, &fuzz_old_bus, NULL);
	(void)sig;
}

/*
 * The daemon's workers and a background thread, as hpzerod starts them,
 * so that faults on a registered region are served while the inputs
 * overwrite its page state.
 */
static void
fuzz_start_threads(void)
{
	struct worker_config	wc;
	struct sigaction	sa;
	struct conf		c;
	char			buf[64];

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = fuzz_sigbus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &fuzz_old_bus);
	/* The daemon's handler goes on top now, not in an input. */
	if (clear_range_guarded(buf, sizeof(buf)) != 0)
		fuzz_fail("clear_range_guarded failed on our own buffer");
	conf_defaults(&c);
	conf_worker(&c, 2, &wc);
	wc.spin_us = 20;
	if (worker_start(&wc) != 0)
		fuzz_fail("cannot start the workers");
	c.scrub_threads = 1;
	if (scrub_start(&c) != 0)
		fuzz_fail("cannot start the background thread");
}

/* Copy size input bytes into m as proto_recv would have received them. */
static void
fuzz_fill(struct hpz_msg *m, const uint8_t *data, size_t size, int nfds)
{
	FUZZ_UNPOISON(m, sizeof(*m));
	memset(m, 0, sizeof(*m));
	m->len = size > HPZ_MSG_MAX ? HPZ_MSG_MAX + 1 : size;
	memcpy(m->u.bytes, data, m->len);
	m->fds[0] = m->fds[1] = m->fds[2] = -1;
	m->nfds = nfds;
}

/* Make the bytes after the message unreadable: nobody may look there. */
static void
fuzz_poison_tail(struct hpz_msg *m)
{
	if (m->len < sizeof(m->u.bytes))
		FUZZ_POISON(m->u.bytes + m->len, sizeof(m->u.bytes) - m->len);
}

static uint16_t
fuzz_type(const struct hpz_msg *m)
{
	return (m->len >= sizeof(m->u.hdr) ? m->u.hdr.type : 0);
}

/* Is why a non-empty string inside its buffer? */
static void
fuzz_check_why(const char *why, size_t whylen, int error)
{
	if (memchr(why, '\0', whylen) == NULL)
		fuzz_fail("error %d: reason is not NUL-terminated", error);
	if (why[0] == '\0')
		fuzz_fail("error %d: empty reason", error);
}

/* What a valid message must look like, field by field. */
static void
fuzz_check_valid(const struct hpz_msg *m)
{
	const struct hpz_msg_header	*h = &m->u.hdr;
	const struct hpz_msg_register	*r = &m->u.reg;
	uint64_t			 a, l;
	size_t				 want = proto_size(h->type);
	int				 wantfds;

	wantfds = h->type == HPZ_MSG_REGISTER ? HPZ_REGISTER_NFDS : 0;
	if (want == 0 || m->len != want || h->len != m->len)
		fuzz_fail("valid %s message of %zu bytes (header %u, want %zu)",
		    proto_type_name(h->type), m->len, h->len, want);
	if (h->magic != HPZ_MAGIC || h->version != HPZ_PROTOCOL_VERSION)
		fuzz_fail("valid message with magic 0x%x version %u",
		    h->magic, h->version);
	if (m->nfds != wantfds)
		fuzz_fail("valid %s message with %d fds",
		    proto_type_name(h->type), m->nfds);
	switch (h->type) {
	case HPZ_MSG_REGISTER:
		if (r->page_size < 4096 ||
		    (r->page_size & (r->page_size - 1)) != 0 ||
		    r->len == 0 ||
		    (r->addr | r->len | r->offset) % r->page_size != 0 ||
		    r->addr + r->len < r->addr ||
		    r->offset + r->len < r->offset ||
		    r->offset + r->len > (uint64_t)INT64_MAX ||
		    (r->flags & ~HPZ_REGION_FLAGS) != 0 || r->reserved != 0)
			fuzz_fail("valid register with bad fields: addr 0x%llx "
			    "len %llu offset %llu page %llu flags 0x%x",
			    (unsigned long long)r->addr,
			    (unsigned long long)r->len,
			    (unsigned long long)r->offset,
			    (unsigned long long)r->page_size, r->flags);
		return;
	case HPZ_MSG_UNREGISTER:
	case HPZ_MSG_RESET:
	case HPZ_MSG_SCRUB:
		a = m->u.range.addr;
		l = m->u.range.len;
		break;
	case HPZ_MSG_POLICY:
		a = m->u.policy.addr;
		l = m->u.policy.len;
		if ((m->u.policy.flags & ~HPZ_REGION_FLAGS) != 0 ||
		    m->u.policy.priority < HPZ_PRIO_MIN ||
		    m->u.policy.priority > HPZ_PRIO_MAX)
			fuzz_fail("valid policy with flags 0x%x priority %d",
			    m->u.policy.flags, m->u.policy.priority);
		break;
	default:
		return;
	}
	if (l == 0 || (a & 4095) != 0 || (l & 4095) != 0 || a + l < a)
		fuzz_fail("valid %s with range 0x%llx +%llu",
		    proto_type_name(h->type), (unsigned long long)a,
		    (unsigned long long)l);
}

/* -EINVAL promises a well-framed message (control_message keeps the client). */
static void
fuzz_check_framed(const struct hpz_msg *m)
{
	const struct hpz_msg_header	*h = &m->u.hdr;

	if (m->len < sizeof(*h) || m->len > HPZ_MSG_MAX ||
	    h->magic != HPZ_MAGIC || h->version != HPZ_PROTOCOL_VERSION ||
	    proto_size(h->type) != m->len || h->len != m->len ||
	    m->nfds != (h->type == HPZ_MSG_REGISTER ? HPZ_REGISTER_NFDS : 0))
		fuzz_fail("-EINVAL for a badly framed message (%zu bytes, "
		    "%d fds)", m->len, m->nfds);
}

/* Part a: one message through proto_validate, and what it may answer. */
static void
fuzz_decoder(const uint8_t *data, size_t size)
{
	struct hpz_msg	*m = &fuzz_msg;
	char		 why[HPZ_REPLY_TEXT], why2[HPZ_REPLY_TEXT], *small;
	int		 error, error2;
	size_t		 whylen;

	if (size < 1)
		return;
	fuzz_fill(m, data + 1, size - 1, data[0] % 71);

	memset(why, 0xa5, sizeof(why));
	fuzz_poison_tail(m);
	error = proto_validate(m, why, sizeof(why));
	FUZZ_UNPOISON(m, sizeof(*m));
	if (m->fds[0] != -1 || m->fds[1] != -1 || m->fds[2] != -1)
		fuzz_fail("proto_validate changed the fds");
	if (error > 0)
		fuzz_fail("proto_validate returned %d", error);
	if (error == 0)
		fuzz_check_valid(m);
	else {
		fuzz_check_why(why, sizeof(why), error);
		if (error != -EMSGSIZE && error != -EBADMSG &&
		    error != -EPROTONOSUPPORT && error != -EINVAL)
			fuzz_fail("proto_validate returned %d (%s)", error,
			    strerror(-error));
		if (error == -EINVAL)
			fuzz_check_framed(m);
	}

	/* The verdict depends on the message alone, not the bytes after. */
	if (m->len < sizeof(m->u.bytes))
		memset(m->u.bytes + m->len, 0xff,
		    sizeof(m->u.bytes) - m->len);
	memset(why2, 0x5a, sizeof(why2));
	error2 = proto_validate(m, why2, sizeof(why2));
	if (error2 != error || (error != 0 && strcmp(why, why2) != 0))
		fuzz_fail("verdict changed with the bytes after the message: "
		    "%d \"%s\", then %d \"%s\"", error, error ? why : "",
		    error2, error2 ? why2 : "");

	/* No reason wanted, or a short buffer: the same verdict, no overrun. */
	if (proto_validate(m, NULL, 0) != error)
		fuzz_fail("verdict changed without a reason buffer");
	whylen = 1 + (size % 16);
	if ((small = malloc(whylen)) == NULL)
		fuzz_fail("malloc");
	memset(small, 0x77, whylen);
	if (proto_validate(m, small, whylen) != error)
		fuzz_fail("verdict changed with a %zu-byte reason buffer",
		    whylen);
	if (error != 0 && memchr(small, '\0', whylen) == NULL)
		fuzz_fail("%zu-byte reason buffer not terminated", whylen);
	free(small);
}

/* Set up the client side of a real uffd: shmem mapped and registered. */
static int
fuzz_real_setup(struct fuzz_session *s)
{
	struct uffdio_api	 api;
	struct uffdio_register	 reg;
	void			*p;

	if ((s->uffd = fuzz_userfaultfd()) == -1)
		return (-1);
	memset(&api, 0, sizeof(api));
	api.api = UFFD_API;
	api.features = UFFD_FEATURE_MINOR_SHMEM;
	if (ioctl(s->uffd, UFFDIO_API, &api) == -1) {
		/* A kernel without minor faults: a plain one. */
		close(s->uffd);
		if ((s->uffd = fuzz_userfaultfd()) == -1)
			return (-1);
		memset(&api, 0, sizeof(api));
		api.api = UFFD_API;
		if (ioctl(s->uffd, UFFDIO_API, &api) == -1)
			goto fail;
	}
	s->features = api.features;
	s->maplen = FUZZ_MAP_PAGES * fuzz_page;
	if ((s->memfd = memfd_create("hpz-fuzz", MFD_CLOEXEC)) == -1 ||
	    ftruncate(s->memfd, (off_t)s->maplen) == -1)
		goto fail;
	p = mmap(NULL, s->maplen, PROT_READ | PROT_WRITE, MAP_SHARED,
	    s->memfd, 0);
	if (p == MAP_FAILED)
		goto fail;
	s->map = p;
	/* Never touched: a fault here would wait for workers there are not. */
	memset(&reg, 0, sizeof(reg));
	reg.range.start = (uint64_t)(uintptr_t)s->map;
	reg.range.len = s->maplen;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if (s->features & UFFD_FEATURE_MINOR_SHMEM)
		reg.mode |= UFFDIO_REGISTER_MODE_MINOR;
	if (ioctl(s->uffd, UFFDIO_REGISTER, &reg) == 0)
		s->ioctls = reg.ioctls;
	return (0);

fail:
	if (s->map != NULL)
		munmap(s->map, s->maplen);
	if (s->memfd != -1)
		close(s->memfd);
	close(s->uffd);
	s->map = NULL;
	s->memfd = s->uffd = -1;
	return (-1);
}

/*
 * Point a request at the real mapping: addresses below its size are taken
 * as offsets into it, and a register gets the fields that let it succeed.
 */
static void
fuzz_fixup(struct fuzz_session *s, struct hpz_msg *m)
{
	struct hpz_msg_register	*r = &m->u.reg;
	uint64_t		 base = (uint64_t)(uintptr_t)s->map, rel, len;
	uint64_t		*addr;

	switch (fuzz_type(m)) {
	case HPZ_MSG_REGISTER:
		if (m->len < sizeof(*r))
			return;
		rel = (r->addr % s->maplen) & ~(fuzz_page - 1);
		len = r->len & ~(fuzz_page - 1);
		if (len == 0 || len > s->maplen - rel)
			len = s->maplen - rel;
		r->addr = base + rel;
		r->len = len;
		r->offset = rel;
		r->page_size = fuzz_page;
		r->uffd_features |= s->features | UFFD_FEATURE_MINOR_SHMEM;
		r->uffd_ioctls |= s->ioctls | (1ULL << _UFFDIO_CONTINUE) |
		    (1ULL << _UFFDIO_WAKE);
		return;
	case HPZ_MSG_UNREGISTER:
	case HPZ_MSG_RESET:
	case HPZ_MSG_SCRUB:
		if (m->len < sizeof(m->u.range))
			return;
		addr = &m->u.range.addr;
		break;
	case HPZ_MSG_POLICY:
		if (m->len < sizeof(m->u.policy))
			return;
		addr = &m->u.policy.addr;
		break;
	default:
		return;
	}
	if (*addr < s->maplen)
		*addr += base;
}

static int
fuzz_fd(int fd)
{
	if (fd == -1)
		fuzz_fail("cannot make a descriptor: %s (leaking?)",
		    strerror(errno));
	return (fd);
}

/* A descriptor standing for the uffd: a dup of the real one, or not one. */
static int
fuzz_uffd(struct fuzz_session *s)
{
	if (s->uffd != -1)
		return (fuzz_fd(fcntl(s->uffd, F_DUPFD_CLOEXEC, 0)));
	return (fuzz_fd(eventfd(0, EFD_CLOEXEC)));
}

/* A descriptor standing for the backing file. */
static int
fuzz_backing(struct fuzz_session *s)
{
	if (s->memfd != -1)
		return (fuzz_fd(fcntl(s->memfd, F_DUPFD_CLOEXEC, 0)));
	return (fuzz_fd(memfd_create("hpz-fuzz-fake", MFD_CLOEXEC)));
}

static int
fuzz_read_only(struct fuzz_session *s)
{
	char	path[64];
	int	fd, rofd;

	fd = fuzz_backing(s);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rofd = open(path, O_RDONLY | O_CLOEXEC);
	close(fd);
	return (fuzz_fd(rofd));
}

/*
 * A page-state memfd for the session's mapping, as libhpz makes it
 * (sealed), or with sealed 0 an unsealed one the daemon must refuse.
 */
static int
fuzz_state(struct fuzz_session *s, int sealed)
{
	uint64_t	npages = s->maplen / (fuzz_page ? fuzz_page : 4096);
	int		fd;

	fd = memfd_create("hpz-fuzz-state", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd == -1)
		return (-1);
	if (ftruncate(fd, (off_t)HPZ_STATE_SIZE(npages + 1)) == -1 ||
	    (sealed && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK |
	    F_SEAL_GROW) == -1)) {
		close(fd);
		return (-1);
	}
	return (fuzz_fd(fd));
}

/* Attach the fds a record asks for, as proto_recv would. */
static void
fuzz_attach(struct fuzz_session *s, struct hpz_msg *m, enum fuzz_fds sel)
{
	int	nfds = 0, fds[HPZ_REGISTER_NFDS] = { -1, -1, -1 };

	switch (sel) {
	case FDS_DEFAULT:
		if (fuzz_type(m) != HPZ_MSG_REGISTER)
			break;
		/* FALLTHROUGH */
	case FDS_FLOOD:
		fds[0] = fuzz_uffd(s);
		fds[1] = fuzz_backing(s);
		fds[2] = fuzz_state(s, 1);
		nfds = sel == FDS_FLOOD ? 3 + FUZZ_FLOOD : 3;
		break;
	case FDS_NONE:
		break;
	case FDS_UFFD:
		fds[0] = fuzz_uffd(s);
		nfds = 1;
		break;
	case FDS_FAKE:
		fds[0] = fuzz_fd(eventfd(0, EFD_CLOEXEC));
		fds[1] = fuzz_fd(memfd_create("hpz-fuzz-fake", MFD_CLOEXEC));
		fds[2] = fuzz_state(s, 0);
		nfds = 3;
		break;
	case FDS_SWAPPED:
		fds[0] = fuzz_backing(s);
		fds[1] = fuzz_uffd(s);
		fds[2] = fuzz_state(s, 1);
		nfds = 3;
		break;
	case FDS_NOT_FILE:
		fds[0] = fuzz_uffd(s);
		fds[1] = fuzz_fd(eventfd(0, EFD_CLOEXEC));
		fds[2] = fuzz_state(s, 1);
		nfds = 3;
		break;
	case FDS_READ_ONLY:
		fds[0] = fuzz_uffd(s);
		fds[1] = fuzz_read_only(s);
		fds[2] = fuzz_state(s, 1);
		nfds = 3;
		break;
	}
	m->fds[0] = s->made[0] = fds[0];
	m->fds[1] = s->made[1] = fds[1];
	m->fds[2] = s->made[2] = fds[2];
	m->nfds = nfds;
}

/*
 * Send a record on sock: n bytes of data with the start as fixed up in m,
 * and the fds fuzz_attach made (closed here: the copies are in flight).
 * Returns how many fds went.
 */
static int
fuzz_send(int sock, struct hpz_msg *m, const uint8_t *data, size_t n)
{
	struct msghdr	 mh;
	struct iovec	 iov;
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) *
				    (HPZ_REGISTER_NFDS + FUZZ_FLOOD))];
	}		 cm;
	struct cmsghdr	*c;
	int		 fds[HPZ_REGISTER_NFDS + FUZZ_FLOOD];
	int		 i, nsent = 0, sentfds = m->nfds;

	memcpy(fuzz_wire_buf, data, n);
	memcpy(fuzz_wire_buf, m->u.bytes, n < m->len ? n : m->len);
	for (i = 0; i < sentfds; i++) {
		if (i < HPZ_REGISTER_NFDS && m->fds[i] != -1)
			fds[nsent++] = m->fds[i];
		else if (i >= HPZ_REGISTER_NFDS)
			fds[nsent++] = fuzz_fd(eventfd(0, EFD_CLOEXEC));
	}
	memset(&mh, 0, sizeof(mh));
	iov.iov_base = fuzz_wire_buf;
	iov.iov_len = n;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (nsent > 0) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nsent);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nsent);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nsent);
	}
	if (sendmsg(sock, &mh, MSG_NOSIGNAL) != (ssize_t)n)
		fuzz_fail("sendmsg %zu bytes, %d fds: %s", n, nsent,
		    strerror(errno));
	for (i = 0; i < nsent; i++)
		close(fds[i]);
	m->fds[0] = m->fds[1] = m->fds[2] = -1;
	m->nfds = 0;
	return (nsent);
}

/*
 * Send the record from the peer and read it back into m with proto_recv,
 * as the daemon does.  Returns what proto_recv returned.
 */
static ssize_t
fuzz_wire(struct fuzz_session *s, struct hpz_msg *m, const uint8_t *data,
    size_t n)
{
	ssize_t	got;
	int	i, nsent;

	nsent = fuzz_send(s->peer, m, data, n);
	got = proto_recv(s->c.fd, m);
	if (got == -1)
		fuzz_fail("proto_recv: %s", strerror(errno));
	if (m->len != (n > HPZ_MSG_MAX ? HPZ_MSG_MAX + 1 : n) ||
	    got != (ssize_t)m->len)
		fuzz_fail("proto_recv: %zd, len %zu for %zu bytes sent", got,
		    m->len, n);
	if (memcmp(m->u.bytes, fuzz_wire_buf,
	    m->len < n ? m->len : n) != 0)
		fuzz_fail("proto_recv: the bytes changed on the way");
	/* An empty message is the end: proto_recv may close what came. */
	if (got != 0 && (nsent <= FUZZ_CMSG_FDS ? m->nfds != nsent :
	    m->nfds <= HPZ_REGISTER_NFDS))
		fuzz_fail("proto_recv: %d fds for %d sent", m->nfds, nsent);
	for (i = 0; i < HPZ_REGISTER_NFDS; i++) {
		if ((i < m->nfds) != (m->fds[i] != -1))
			fuzz_fail("proto_recv: fds[%d] is %d of %d", i,
			    m->fds[i], m->nfds);
		s->made[i] = m->fds[i];
	}
	return (got);
}

static int
fuzz_fd_open(int fd)
{
	return (fcntl(fd, F_GETFD) != -1);
}

/* The session's regions agree with each other and with region_all. */
static void
fuzz_check_regions(struct fuzz_session *s)
{
	struct region	*r, *q;
	size_t		 n = 0, nall = 0;

	TAILQ_FOREACH(r, &s->c.regions, entry) {
		n++;
		if (r->client != &s->c)
			fuzz_fail("region %llu has another client",
			    (unsigned long long)r->id);
		if (!fuzz_fd_open(r->uffd) || !fuzz_fd_open(r->fd))
			fuzz_fail("region %llu: its fds %d, %d are closed",
			    (unsigned long long)r->id, r->uffd, r->fd);
		if (r->len == 0 || r->npages * r->page_size != r->len)
			fuzz_fail("region %llu: len %llu, %llu pages of %llu",
			    (unsigned long long)r->id,
			    (unsigned long long)r->len,
			    (unsigned long long)r->npages,
			    (unsigned long long)r->page_size);
		for (q = TAILQ_NEXT(r, entry); q != NULL;
		    q = TAILQ_NEXT(q, entry)) {
			if (region_overlaps(r->addr, r->len, q->addr, q->len))
				fuzz_fail("regions %llu and %llu overlap",
				    (unsigned long long)r->id,
				    (unsigned long long)q->id);
			if (r->dev == q->dev && r->ino == q->ino &&
			    region_overlaps(r->offset, r->len, q->offset,
			    q->len))
				fuzz_fail("regions %llu and %llu share file "
				    "pages", (unsigned long long)r->id,
				    (unsigned long long)q->id);
		}
	}
	TAILQ_FOREACH(r, &region_all, all)
		nall++;
	if (n != s->c.nregions || nall != n)
		fuzz_fail("client counts %zu regions, has %zu, daemon %zu",
		    s->c.nregions, n, nall);
}

/* The fds we passed are closed now, unless a region keeps them. */
static void
fuzz_check_fds(struct fuzz_session *s)
{
	struct region	*r;
	int		 i, fd, owned;

	for (i = 0; i < HPZ_REGISTER_NFDS; i++) {
		if ((fd = s->made[i]) == -1)
			continue;
		owned = 0;
		TAILQ_FOREACH(r, &s->c.regions, entry)
			if (r->uffd == fd || r->fd == fd || r->sfd == fd)
				owned = 1;
		if (!owned && fuzz_fd_open(fd))
			fuzz_fail("fd %d passed with the message is still "
			    "open and no region holds it", fd);
		if (!owned && errno != EBADF)
			fuzz_fail("fcntl(%d): %s", fd, strerror(errno));
		s->made[i] = -1;
	}
}

static struct region *
fuzz_region_by_id(struct fuzz_session *s, uint64_t id)
{
	struct region	*r;

	TAILQ_FOREACH(r, &s->c.regions, entry)
		if (r->id == id)
			return (r);
	return (NULL);
}

/* Read one reply from the peer into fuzz_rep; 0 when there is none. */
static ssize_t
fuzz_recv(struct fuzz_session *s)
{
	struct hpz_msg	*rep = &fuzz_rep;
	struct msghdr	 mh;
	struct iovec	 iov;
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * 8)];
	}		 cm;
	ssize_t		 n;

	memset(rep, 0, sizeof(*rep));
	memset(&mh, 0, sizeof(mh));
	iov.iov_base = rep->u.bytes;
	iov.iov_len = sizeof(rep->u.bytes);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = sizeof(cm.buf);
	n = recvmsg(s->peer, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return (0);
	if (n == -1)
		fuzz_fail("recvmsg: %s", strerror(errno));
	if (mh.msg_controllen != 0)
		fuzz_fail("the daemon sent fds with a reply");
	if (mh.msg_flags & MSG_TRUNC)
		fuzz_fail("reply longer than %d bytes", HPZ_MSG_MAX);
	rep->len = (size_t)n;
	rep->fds[0] = rep->fds[1] = rep->fds[2] = -1;
	return (n);
}

/* A regions reply lists regions after after_id, in id order. */
static void
fuzz_check_regions_reply(const struct hpz_msg_regions_reply *rr,
    uint64_t after_id)
{
	struct region	*r;
	uint64_t	 prev = after_id, n = 0;
	uint32_t	 i;

	TAILQ_FOREACH(r, &region_all, all)
		if (r->id > after_id)
			n++;
	if (rr->count > n || (rr->more && rr->count != HPZ_REGIONS_PER_REPLY) ||
	    (rr->count < n && rr->count < HPZ_REGIONS_PER_REPLY))
		fuzz_fail("regions reply: %u listed (more %u) of %llu",
		    rr->count, rr->more, (unsigned long long)n);
	for (i = 0; i < rr->count; i++) {
		if (rr->r[i].id <= prev)
			fuzz_fail("regions reply: id %llu after %llu",
			    (unsigned long long)rr->r[i].id,
			    (unsigned long long)prev);
		prev = rr->r[i].id;
	}
}

/*
 * Every request gets exactly one reply with its seq; framing errors drop
 * the client, refusals (-EINVAL and the handlers') keep it.
 */
static void
fuzz_check_reply(struct fuzz_session *s, int verdict, uint16_t type,
    uint32_t seq, uint64_t after_id, size_t nregions_before, int ret)
{
	struct hpz_msg	*rep = &fuzz_rep;
	char		 why[HPZ_REPLY_TEXT];
	uint16_t	 want;
	int		 error;
	struct region	*r;

	if (fuzz_recv(s) == 0)
		fuzz_fail("no reply to a %s request (verdict %d, returned %d)",
		    proto_type_name(type), verdict, ret);
	if ((error = proto_validate(rep, why, sizeof(why))) != 0)
		fuzz_fail("the daemon's reply is invalid: %s", why);
	if (rep->u.hdr.seq != seq)
		fuzz_fail("reply seq %u to request seq %u", rep->u.hdr.seq,
		    seq);
	if (verdict == 0 && type == HPZ_MSG_STATUS)
		want = HPZ_MSG_STATUS_REPLY;
	else if (verdict == 0 && type == HPZ_MSG_REGIONS)
		want = HPZ_MSG_REGIONS_REPLY;
	else if (verdict == 0 && type == HPZ_MSG_POOL_STATUS)
		want = HPZ_MSG_POOL_STATUS_REPLY;
	else
		want = HPZ_MSG_REPLY;	/* a pool take too: no pool here */
	if (rep->u.hdr.type != want)
		fuzz_fail("%s reply to %s (verdict %d)",
		    proto_type_name(rep->u.hdr.type), proto_type_name(type),
		    verdict);
	if (ret != (verdict != 0 && verdict != -EINVAL ? -1 : 0))
		fuzz_fail("control_message returned %d for verdict %d", ret,
		    verdict);
	if (want == HPZ_MSG_REGIONS_REPLY)
		fuzz_check_regions_reply(&rep->u.regions_reply, after_id);
	if (want != HPZ_MSG_REPLY)
		goto out;
	error = rep->u.reply.error;
	if (verdict != 0 && error != verdict)
		fuzz_fail("reply error %d for verdict %d", error, verdict);
	if (error != 0 && rep->u.reply.text[0] == '\0')
		fuzz_fail("reply error %d without a reason", error);
	if (type == HPZ_MSG_REGISTER && verdict == 0 && error == 0) {
		r = fuzz_region_by_id(s, rep->u.reply.region_id);
		if (r == NULL || s->c.nregions != nregions_before + 1)
			fuzz_fail("registered region %llu is not the client's",
			    (unsigned long long)rep->u.reply.region_id);
	} else if (type == HPZ_MSG_UNREGISTER && verdict == 0 && error == 0) {
		if (fuzz_region_by_id(s, rep->u.reply.region_id) != NULL ||
		    s->c.nregions + 1 != nregions_before)
			fuzz_fail("unregistered region %llu is still there",
			    (unsigned long long)rep->u.reply.region_id);
	} else if (s->c.nregions != nregions_before)
		fuzz_fail("%s (error %d) changed the region count %zu -> %zu",
		    proto_type_name(type), error, nregions_before,
		    s->c.nregions);
out:
	if (fuzz_recv(s) != 0)
		fuzz_fail("a second reply (%s) to one %s request",
		    proto_type_name(fuzz_rep.u.hdr.type),
		    proto_type_name(type));
}

/* Open descriptors of this process, or -1 without /proc. */
static int
fuzz_count_fds(void)
{
	struct dirent	*de;
	DIR		*d;
	int		 n = 0;

	if ((d = opendir("/proc/self/fd")) == NULL)
		return (-1);
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return (n - 1);	/* the directory's own */
}

/* Run the daemon's event loop once, without waiting. */
static void
fuzz_loop_once(void)
{
	if (event_base_loop(hpzd_base, EVLOOP_NONBLOCK) == -1)
		fuzz_fail("event_base_loop failed");
}

/* Read the replies waiting on the client's end: each must be valid. */
static int
fuzz_loop_replies(struct fuzz_session *s, uint32_t seq)
{
	char	why[HPZ_REPLY_TEXT];
	int	n = 0;

	while (fuzz_recv(s) > 0) {
		if (proto_validate(&fuzz_rep, why, sizeof(why)) != 0)
			fuzz_fail("the daemon's reply is invalid: %s", why);
		if (fuzz_rep.u.hdr.seq != seq)
			fuzz_fail("reply seq %u to request seq %u",
			    fuzz_rep.u.hdr.seq, seq);
		n++;
	}
	return (n);
}

/* Run the daemon's event loop until its work on our regions is done. */
static void
fuzz_quiesce(void)
{
	struct region	*r;
	uint64_t	 t0 = stats_now_ns();
	int		 busy;

	for (;;) {
		busy = 0;
		TAILQ_FOREACH(r, &region_all, all)
			if (atomic_load(&r->inflight) != 0 ||
			    !TAILQ_EMPTY(&r->resets))
				busy = 1;
		if (!busy)
			return;
		fuzz_loop_once();
		if (stats_now_ns() - t0 > FUZZ_SERVE_MS * 1000000ULL)
			fuzz_fail("the daemon's work on a region did not "
			    "settle in %d ms", FUZZ_SERVE_MS);
		usleep(100);
	}
}

/* The toucher: a client thread faulting on its pages. */
struct fuzz_touch {
	struct fuzz_session	*s;
	uint8_t			 op[FUZZ_ACTION_OPS][3];
	size_t			 nop;
	uint8_t			 served[FUZZ_MAP_PAGES];
	atomic_int		 done;
	int			 sigbus;
};

static void *
fuzz_touch_main(void *arg)
{
	struct fuzz_touch	*t = arg;
	volatile char		*p;
	size_t			 i, page;
	int			 kind;

	for (i = 0; i < t->nop; i++) {
		kind = t->op[i][0] & 3;
		if (kind != FUZZ_ACTION_TOUCH && kind != FUZZ_ACTION_DROP)
			continue;
		page = t->op[i][1] % FUZZ_MAP_PAGES;
		if (!t->served[page])
			continue;	/* nobody would answer: never touched */
		p = t->s->map + page * fuzz_page;
		if (sigsetjmp(fuzz_jb, 1) != 0) {
			t->sigbus++;
			continue;
		}
		fuzz_armed = 1;
		if (kind == FUZZ_ACTION_DROP)
			(void)madvise((void *)p, fuzz_page, MADV_DONTNEED);
		else if (t->op[i][2] & 1)
			(void)*p;
		else
			*p = (char)t->op[i][2];
		fuzz_armed = 0;
	}
	atomic_store(&t->done, 1);
	return (NULL);
}

/* Overwrite a byte of a region's page state, as its client may. */
static void
fuzz_scribble(const uint8_t *op)
{
	struct region	*r;
	size_t		 n = 0, k;
	uint8_t		*b;

	TAILQ_FOREACH(r, &region_all, all)
		n++;
	if (n == 0)
		return;
	k = (size_t)(op[0] >> 2) % n;
	TAILQ_FOREACH(r, &region_all, all)
		if (k-- == 0)
			break;
	b = r->smap;
	if ((op[0] & 3) == FUZZ_ACTION_STATE)
		b[HPZ_STATE_PAGES_OFF + op[1] % r->npages] = op[2];
	else
		b[op[1] % sizeof(struct hpz_state_header)] = op[2];
}

/*
 * An action record: the toucher faults on registered pages while we
 * overwrite page-state and header bytes and turn the daemon's loop; every
 * fault must be answered (mapped, or the kernel's SIGBUS) in time.
 */
static void
fuzz_action(struct fuzz_session *s, const uint8_t *data, size_t n)
{
	struct fuzz_touch	 t;
	struct region		*r;
	pthread_t		 th;
	uint64_t		 t0, base, page;
	size_t			 i, k = 0;
	int			 kind;

	if (s->map == NULL)
		return;
	memset(&t, 0, sizeof(t));
	t.s = s;
	data += strlen(FUZZ_ACTION_MAGIC);
	n -= strlen(FUZZ_ACTION_MAGIC);
	for (i = 0; i + 3 <= n && t.nop < FUZZ_ACTION_OPS; i += 3)
		memcpy(t.op[t.nop++], data + i, 3);
	/* Pages a region of ours serves; others would wait for nobody. */
	base = (uint64_t)(uintptr_t)s->map;
	TAILQ_FOREACH(r, &region_all, all)
		for (page = 0; page < FUZZ_MAP_PAGES; page++)
			if (base + page * fuzz_page >= r->addr &&
			    base + page * fuzz_page - r->addr < r->len &&
			    !atomic_load(&r->gone))
				t.served[page] = 1;
	atomic_init(&t.done, 0);
	if (pthread_create(&th, NULL, fuzz_touch_main, &t) != 0)
		fuzz_fail("pthread_create");
	t0 = stats_now_ns();
	while (!atomic_load(&t.done)) {
		for (; k < t.nop; k++) {
			kind = t.op[k][0] & 3;
			if (kind == FUZZ_ACTION_STATE ||
			    kind == FUZZ_ACTION_HEADER) {
				fuzz_scribble(t.op[k++]);
				break;
			}
		}
		fuzz_loop_once();
		if (stats_now_ns() - t0 > FUZZ_SERVE_MS * 1000000ULL)
			fuzz_fail("a fault on a registered page was not "
			    "answered in %d ms (state overwritten)",
			    FUZZ_SERVE_MS);
		usleep(20);
	}
	pthread_join(th, NULL);
	for (; k < t.nop; k++)
		if ((t.op[k][0] & 3) <= FUZZ_ACTION_HEADER)
			fuzz_scribble(t.op[k]);
	fuzz_quiesce();
}

/* Is this record an action (not a message)? */
static int
fuzz_is_action(const uint8_t *data, size_t n)
{
	return (n >= strlen(FUZZ_ACTION_MAGIC) && memcmp(data,
	    FUZZ_ACTION_MAGIC, strlen(FUZZ_ACTION_MAGIC)) == 0);
}

/* A reset's answer may wait for pages our threads hold: let it come. */
static void
fuzz_await_reply(struct fuzz_session *s, uint16_t type)
{
	uint64_t	t0 = stats_now_ns();
	int		n;

	if (type != HPZ_MSG_RESET || s->peer == -1)
		return;
	for (;;) {
		if ((n = recv(s->peer, fuzz_wire_buf, sizeof(fuzz_wire_buf),
		    MSG_PEEK | MSG_DONTWAIT)) >= 0 || errno != EAGAIN)
			return;
		fuzz_loop_once();
		if (stats_now_ns() - t0 > FUZZ_SERVE_MS * 1000000ULL)
			return;		/* fuzz_check_reply says no reply */
		usleep(100);
	}
}

/* A session with nothing made yet. */
static void
fuzz_session_init(struct fuzz_session *s)
{
	memset(s, 0, sizeof(*s));
	s->uffd = s->memfd = -1;
	s->made[0] = s->made[1] = s->made[2] = -1;
}

/* The limits mode asks for, and a real userfaultfd where it asks for one. */
static void
fuzz_session_limits(struct fuzz_session *s, int mode)
{
	struct conf	limits;

	memset(&limits, 0, sizeof(limits));
	if (mode & FUZZ_LIMITS) {
		limits.uid_clients = 1;
		limits.uid_regions = 2;
		limits.uid_bytes = FUZZ_LIMIT_PAGES * fuzz_page;
	}
	control_limits(&limits);
	if ((mode & FUZZ_REAL_UFFD) && fuzz_have_uffd)
		fuzz_real_setup(s);
}

/* What the session mapped and opened of its own. */
static void
fuzz_session_close(struct fuzz_session *s)
{
	if (s->map != NULL)
		munmap(s->map, s->maplen);
	if (s->memfd != -1)
		close(s->memfd);
	if (s->uffd != -1)
		close(s->uffd);
}

/*
 * The next record of data at *off: an action is done here (1); a message
 * is filled into m, fixed up unless FUZZ_RAW and given its fds (0), its
 * bytes at *rec, *nrec of them; -1 when the data is used up.
 */
static int
fuzz_record(struct fuzz_session *s, const uint8_t *data, size_t size,
    size_t *off, int mode, struct hpz_msg *m, const uint8_t **rec,
    size_t *nrec)
{
	uint16_t	word;
	size_t		n;

	if (size - *off < 2)
		return (-1);
	word = (uint16_t)(data[*off] | data[*off + 1] << 8);
	*off += 2;
	n = word & FUZZ_LEN_MASK;
	if (n > size - *off)
		n = size - *off;
	*rec = data + *off;
	*nrec = n;
	*off += n;
	if (fuzz_is_action(*rec, n)) {
		fuzz_action(s, *rec, n);
		return (1);
	}
	fuzz_fill(m, *rec, n, 0);
	if (s->map != NULL && (mode & FUZZ_RAW) == 0)
		fuzz_fixup(s, m);
	fuzz_attach(s, m, (enum fuzz_fds)(word >> FUZZ_FDS_SHIFT));
	return (0);
}

/*
 * Part b, the daemon's way: connect to its listening socket and let its
 * event loop accept (control_accept_cb), read (control_read_cb, proto_recv)
 * and drop (control_drop) the client.  When the client has gone, the
 * daemon holds no more descriptors than before it came.
 */
static void
fuzz_loop(const uint8_t *data, size_t size, int mode)
{
	struct fuzz_session	 s;
	struct hpz_msg		*m = &fuzz_msg;
	struct client		*c;
	const uint8_t		*rec;
	size_t			 off = 0, n;
	uint32_t		 seq;
	uint16_t		 type;
	int			 before, after, fd, k;

	fuzz_session_init(&s);
	fuzz_session_limits(&s, mode);
	before = fuzz_count_fds();

	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd == -1 || connect(fd, (struct sockaddr *)&fuzz_sun,
	    fuzz_sunlen) == -1)
		fuzz_fail("connect: %s", strerror(errno));
	s.peer = fd;
	fuzz_loop_once();
	if (control_nclients() != 1 ||
	    (c = TAILQ_FIRST(&control_clients)) == NULL ||
	    c->pid != getpid())
		fuzz_fail("the daemon did not take the connection (%zu "
		    "clients)", control_nclients());

	while (control_nclients() == 1 &&
	    (k = fuzz_record(&s, data, size, &off, mode, m, &rec, &n)) >= 0) {
		if (k > 0)
			continue;
		seq = m->len >= sizeof(m->u.hdr) ? m->u.hdr.seq : 0;
		type = fuzz_type(m);
		fuzz_send(fd, m, rec, n);
		s.made[0] = s.made[1] = s.made[2] = -1;
		fuzz_loop_once();
		if (type == HPZ_MSG_RESET)
			fuzz_await_reply(&s, type);
		if (fuzz_loop_replies(&s, seq) > 1)
			fuzz_fail("more than one reply to a request");
	}

	/* Hang up; the daemon must let the client go, and all it had. */
	close(fd);
	s.peer = -1;
	fuzz_loop_once();
	if (control_nclients() != 0 || !TAILQ_EMPTY(&control_clients))
		fuzz_fail("the client is still there after it hung up");
	if (!TAILQ_EMPTY(&region_all))
		fuzz_fail("regions left after the client went");
	after = fuzz_count_fds();
	if (before != -1 && after != before)
		fuzz_fail("the daemon holds %d descriptors more after the "
		    "client went", after - before);
	fuzz_session_close(&s);
}

/* Part b: the records as one client's session, then the client goes. */
static void
fuzz_session(const uint8_t *data, size_t size, int mode)
{
	struct fuzz_session	 s;
	struct hpz_msg		*m = &fuzz_msg;
	struct region		*r;
	char			 why[HPZ_REPLY_TEXT];
	const uint8_t		*rec;
	size_t			 off = 0, n, nregions;
	uint64_t		 after_id;
	uint32_t		 seq;
	uint16_t		 type;
	int			 sp[2], ret, verdict, k;

	fuzz_session_init(&s);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0, sp) == -1)
		fuzz_fail("socketpair: %s", strerror(errno));
	s.c.id = ++fuzz_client_id;
	s.c.fd = sp[0];
	s.peer = sp[1];
	s.c.pid = getpid();
	s.c.uid = getuid();
	s.c.gid = getgid();
	s.c.budget = bucket_new(0);
	TAILQ_INIT(&s.c.regions);
	/* A connected client, as control_accept_cb makes it: limits see it. */
	TAILQ_INSERT_TAIL(&control_clients, &s.c, entry);
	fuzz_session_limits(&s, mode);
	if (mode & FUZZ_PEER_GONE) {
		close(s.peer);
		s.peer = -1;
	}

	while ((k = fuzz_record(&s, data, size, &off, mode, m, &rec,
	    &n)) >= 0) {
		if (k > 0)
			continue;
		if ((mode & FUZZ_WIRE) && s.peer != -1)
			fuzz_wire(&s, m, rec, n);
		if (m->len == 0) {
			/*
			 * proto_recv returns 0: the end, the client goes.
			 * What becomes of fds that came with it is seen in
			 * FUZZ_LOOP, through control_read_cb itself.
			 */
			proto_close_fds(m);
			break;
		}

		/* What the daemon should say, worked out beforehand. */
		type = fuzz_type(m);
		seq = m->len >= sizeof(m->u.hdr) ? m->u.hdr.seq : 0;
		verdict = proto_validate(m, why, sizeof(why));
		if (verdict == 0 && type >= HPZ_MSG_REPLY)
			verdict = -EBADMSG;
		after_id = verdict == 0 && type == HPZ_MSG_REGIONS ?
		    m->u.regions.after_id : 0;
		nregions = s.c.nregions;

		fuzz_poison_tail(m);
		ret = control_message(&s.c, m);
		FUZZ_UNPOISON(m, sizeof(*m));
		if (ret != 0 && ret != -1)
			fuzz_fail("control_message returned %d", ret);
		if (ret == -1)
			proto_close_fds(m);	/* as control_read_cb does */
		fuzz_check_fds(&s);
		fuzz_check_regions(&s);
		if (ret == 0)
			fuzz_await_reply(&s, type);
		if (s.peer != -1)
			fuzz_check_reply(&s, verdict, type, seq, after_id,
			    nregions, ret);
		if (ret == -1)
			break;		/* the daemon drops the client */
	}

	/* The client goes: release its regions as control_drop does. */
	while ((r = TAILQ_FIRST(&s.c.regions)) != NULL)
		region_destroy(r);
	if (s.c.nregions != 0 || !TAILQ_EMPTY(&region_all))
		fuzz_fail("regions left after the client went");
	TAILQ_REMOVE(&control_clients, &s.c, entry);
	bucket_free(s.c.budget);
	close(s.c.fd);
	if (s.peer != -1)
		close(s.peer);
	fuzz_session_close(&s);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int	mode, parts, before, after;

	if (size < 1)
		return (0);
	before = fuzz_count_fds();
	mode = data[0];
	parts = mode & (FUZZ_DECODER | FUZZ_SESSION);
	if (parts == 0)
		parts = FUZZ_DECODER | FUZZ_SESSION;
	if (parts & FUZZ_DECODER)
		fuzz_decoder(data + 1, size - 1);
	if ((parts & FUZZ_SESSION) && (mode & FUZZ_LOOP) && fuzz_sunlen != 0)
		fuzz_loop(data + 1, size - 1, mode);
	else if (parts & FUZZ_SESSION)
		fuzz_session(data + 1, size - 1, mode);
	after = fuzz_count_fds();
	if (before != -1 && after != before)
		fuzz_fail("%d descriptors open before the input, %d after",
		    before, after);
	return (0);
}

#ifdef HPZ_FUZZ_STANDALONE
/* Run one file through the target. */
static int
fuzz_file(const char *path)
{
	struct stat	 st;
	uint8_t		*buf;
	ssize_t		 n;
	int		 fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1 ||
	    fstat(fd, &st) == -1) {
		fprintf(fuzz_err, "%s: %s\n", path, strerror(errno));
		if (fd != -1)
			close(fd);
		return (-1);
	}
	if ((buf = malloc((size_t)st.st_size + 1)) == NULL)
		fuzz_fail("malloc");
	n = read(fd, buf, (size_t)st.st_size);
	close(fd);
	if (n == -1) {
		fprintf(fuzz_err, "%s: %s\n", path, strerror(errno));
		free(buf);
		return (-1);
	}
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return (0);
}

/* Replay files, or every file of a directory, without libFuzzer. */
int
main(int argc, char **argv)
{
	struct dirent	*de;
	struct stat	 st;
	DIR		*d;
	char		 path[4096];
	int		 i, runs = 0, bad = 0;

	LLVMFuzzerInitialize(&argc, &argv);
	for (i = 1; i < argc; i++) {
		if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			if ((d = opendir(argv[i])) == NULL) {
				bad++;
				continue;
			}
			while ((de = readdir(d)) != NULL) {
				if (de->d_name[0] == '.')
					continue;
				snprintf(path, sizeof(path), "%s/%s", argv[i],
				    de->d_name);
				if (fuzz_file(path) == 0)
					runs++;
				else
					bad++;
			}
			closedir(d);
		} else if (fuzz_file(argv[i]) == 0)
			runs++;
		else
			bad++;
	}
	fprintf(fuzz_err, "fuzz-proto: %d inputs run, %d unreadable\n", runs,
	    bad);
	return (bad != 0);
}
#endif /* HPZ_FUZZ_STANDALONE */
