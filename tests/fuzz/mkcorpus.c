/*
 * mkcorpus.c - write the seed corpus of fuzz-proto into a directory: every
 * request type, mutations of them for the decoder, and a few sessions.
 * The input format is described at the top of fuzz-proto.c.
 *
 *   cc -I lib -o /tmp/mkcorpus tests/fuzz/mkcorpus.c lib/proto.c
 *   /tmp/mkcorpus tests/fuzz/corpus
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hpz.h"
#include "hpz-protocol.h"

/* Byte 0 of an input, as in fuzz-proto.c. */
#define MK_DECODER	0x01
#define MK_SESSION	0x02
#define MK_REAL_UFFD	0x04
#define MK_RAW		0x08
#define MK_PEER_GONE	0x10
#define MK_LIMITS	0x20	/* 2 regions, 6 pages a uid */
#define MK_WIRE		0x40	/* through the socket and proto_recv */
#define MK_LOOP		0x80	/* through the daemon's event loop */

/* The fds of a session record, as enum fuzz_fds in fuzz-proto.c. */
#define FDS_DEFAULT	0
#define FDS_NONE	1
#define FDS_UFFD	2
#define FDS_FAKE	3
#define FDS_SWAPPED	4
#define FDS_NOT_FILE	5
#define FDS_READ_ONLY	6
#define FDS_FLOOD	7

/* An action record, as FUZZ_ACTION_* in fuzz-proto.c. */
#define MK_ACT_STATE	0
#define MK_ACT_HEADER	1
#define MK_ACT_TOUCH	2
#define MK_ACT_DROP	3

#define MK_MAX		4200	/* fuzz.sh's -max_len */
#define PG		4096ULL

struct mk_buf {
	unsigned char	b[MK_MAX];
	size_t		n;
};

static const char	*mk_dir;
static int		 mk_files;

static void
mk_put(struct mk_buf *b, const void *p, size_t len)
{
	if (b->n + len > sizeof(b->b)) {
		fprintf(stderr, "mkcorpus: input too long\n");
		exit(1);
	}
	memcpy(b->b + b->n, p, len);
	b->n += len;
}

static void
mk_start(struct mk_buf *b, unsigned char mode)
{
	b->n = 0;
	mk_put(b, &mode, 1);
}

/* A session record: length and fds in a 16-bit little-endian word. */
static void
mk_record(struct mk_buf *b, const void *msg, size_t len, int fds)
{
	unsigned int	w = (unsigned int)len | (unsigned int)fds << 13;
	unsigned char	word[2] = { w & 0xff, (w >> 8) & 0xff };

	mk_put(b, word, 2);
	mk_put(b, msg, len);
}

static void
mk_write(const struct mk_buf *b, const char *name)
{
	char	path[4096];
	FILE	*f;

	snprintf(path, sizeof(path), "%s/%s", mk_dir, name);
	if ((f = fopen(path, "w")) == NULL ||
	    fwrite(b->b, 1, b->n, f) != b->n || fclose(f) != 0) {
		fprintf(stderr, "mkcorpus: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	mk_files++;
}

/* A decoder input: mode, fd count, the message. */
static void
mk_decoder(const char *name, const void *msg, size_t len, int nfds)
{
	struct mk_buf	b;
	unsigned char	n = (unsigned char)nfds;

	mk_start(&b, MK_DECODER);
	mk_put(&b, &n, 1);
	mk_put(&b, msg, len);
	mk_write(&b, name);
}

static struct hpz_msg_register
mk_register(uint32_t seq, uint64_t addr, uint64_t len, uint32_t flags)
{
	struct hpz_msg_register	r;

	proto_init(&r, HPZ_MSG_REGISTER, sizeof(r), seq);
	r.addr = addr;
	r.len = len;
	r.offset = addr;
	r.page_size = PG;
	r.uffd_features = 0;
	r.uffd_ioctls = 0;
	r.flags = flags;
	return (r);
}

static struct hpz_msg_range
mk_range(uint16_t type, uint32_t seq, uint64_t addr, uint64_t len)
{
	struct hpz_msg_range	r;

	proto_init(&r, type, sizeof(r), seq);
	r.addr = addr;
	r.len = len;
	return (r);
}

static struct hpz_msg_policy
mk_policy(uint32_t seq, uint64_t addr, uint64_t len, uint32_t flags,
    int prio)
{
	struct hpz_msg_policy	p;

	proto_init(&p, HPZ_MSG_POLICY, sizeof(p), seq);
	p.addr = addr;
	p.len = len;
	p.flags = flags;
	p.priority = prio;
	return (p);
}

static struct hpz_msg_header
mk_status(uint32_t seq)
{
	struct hpz_msg_header	h;

	proto_init(&h, HPZ_MSG_STATUS, sizeof(h), seq);
	return (h);
}

static struct hpz_msg_regions
mk_regions(uint32_t seq, uint64_t after)
{
	struct hpz_msg_regions	r;

	proto_init(&r, HPZ_MSG_REGIONS, sizeof(r), seq);
	r.after_id = after;
	return (r);
}

static void
mk_decoder_inputs(void)
{
	struct hpz_msg_register	 reg = mk_register(1, 0x7f0000000000ULL,
				    64 * PG, HPZ_DISCARD);
	struct hpz_msg_range	 unreg = mk_range(HPZ_MSG_UNREGISTER, 2,
				    0x7f0000000000ULL, 64 * PG);
	struct hpz_msg_range	 reset = mk_range(HPZ_MSG_RESET, 3,
				    0x7f0000000000ULL, 4 * PG);
	struct hpz_msg_range	 scrub = mk_range(HPZ_MSG_SCRUB, 4,
				    0x7f0000001000ULL, PG);
	struct hpz_msg_policy	 pol = mk_policy(5, 0x7f0000000000ULL, 64 * PG,
				    HPZ_PREMAP | HPZ_AHEAD_ONFAULT, 6);
	struct hpz_msg_header	 st = mk_status(6);
	struct hpz_msg_regions	 rg = mk_regions(7, 0);
	struct hpz_msg_reply	 rep;
	struct hpz_msg_pool_take take;
	struct hpz_msg_pool_status ps;
	struct hpz_msg_reserve	 rsv;
	unsigned char		 big[HPZ_MSG_MAX + 1];
	unsigned char		 longer[sizeof(reg) + 8];

	mk_decoder("d-register", &reg, sizeof(reg), 2);
	mk_decoder("d-unregister", &unreg, sizeof(unreg), 0);
	mk_decoder("d-reset", &reset, sizeof(reset), 0);
	mk_decoder("d-scrub", &scrub, sizeof(scrub), 0);
	mk_decoder("d-policy", &pol, sizeof(pol), 0);
	mk_decoder("d-status", &st, sizeof(st), 0);
	mk_decoder("d-regions", &rg, sizeof(rg), 0);
	proto_init(&rep, HPZ_MSG_REPLY, sizeof(rep), 8);
	rep.error = -EINVAL;
	snprintf(rep.text, sizeof(rep.text), "no");
	mk_decoder("d-reply", &rep, sizeof(rep), 0);
	proto_init(&take, HPZ_MSG_POOL_TAKE, sizeof(take), 12);
	take.len = 64 * 512 * PG;
	take.page_size = 512 * PG;
	take.node = -1;
	snprintf(take.name, sizeof(take.name), "memory-backend-memfd");
	mk_decoder("d-pool-take", &take, sizeof(take), 0);
	proto_init(&ps, HPZ_MSG_POOL_STATUS, sizeof(ps), 13);
	mk_decoder("d-pool-status", &ps, sizeof(ps), 0);
	proto_init(&rsv, HPZ_MSG_RESERVE, sizeof(rsv), 14);
	rsv.len = 64 * 512 * PG;
	rsv.page_size = 512 * PG;
	rsv.hold_ms = 1000;
	mk_decoder("d-reserve", &rsv, sizeof(rsv), 0);
	rsv.len = 3 * PG;
	mk_decoder("d-reserve-partial", &rsv, sizeof(rsv), 0);

	/* Mutations. */
	reg.hdr.len -= 8;
	mk_decoder("d-register-short", &reg, sizeof(reg) - 8, 2);
	reg.hdr.len += 16;
	memcpy(longer, &reg, sizeof(reg));
	memset(longer + sizeof(reg), 0, 8);
	mk_decoder("d-register-long", longer, sizeof(longer), 2);
	reg.hdr.len -= 8;
	mk_decoder("d-register-nofds", &reg, sizeof(reg), 0);
	reg.flags = 0x8000;
	mk_decoder("d-register-badflags", &reg, sizeof(reg), 2);
	reg.flags = HPZ_DISCARD;
	reg.page_size = 3 * PG;
	mk_decoder("d-register-badpage", &reg, sizeof(reg), 2);
	pol.priority = HPZ_PRIO_MAX + 1;
	mk_decoder("d-policy-badprio", &pol, sizeof(pol), 0);
	st.magic ^= 0x01000000;
	mk_decoder("d-status-badmagic", &st, sizeof(st), 0);
	st = mk_status(9);
	st.version = HPZ_PROTOCOL_VERSION + 1;
	mk_decoder("d-status-version", &st, sizeof(st), 0);
	st = mk_status(10);
	st.type = 99;
	mk_decoder("d-unknown-type", &st, sizeof(st), 0);
	unreg.len = 100;
	mk_decoder("d-unregister-unaligned", &unreg, sizeof(unreg), 0);
	memset(big, 0, sizeof(big));
	st = mk_status(11);
	memcpy(big, &st, sizeof(st));
	mk_decoder("d-oversized", big, sizeof(big), 0);
}

/* Actions of a hostile client: ops of 3 bytes after "HZFA". */
struct mk_act {
	unsigned char	b[3 * 128 + 4];
	size_t		n;
};

static void
mk_act_start(struct mk_act *a)
{
	memcpy(a->b, "HZFA", 4);
	a->n = 4;
}

static void
mk_act(struct mk_act *a, int kind, unsigned a1, unsigned a2)
{
	if (a->n + 3 > sizeof(a->b)) {
		fprintf(stderr, "mkcorpus: action too long\n");
		exit(1);
	}
	a->b[a->n++] = (unsigned char)kind;
	a->b[a->n++] = (unsigned char)a1;
	a->b[a->n++] = (unsigned char)a2;
}

/* Sessions where the client overwrites its page state while faulting. */
static void
mk_hostile_inputs(void)
{
	struct mk_buf		 b;
	struct mk_act		 a;
	struct hpz_msg_register	 reg;
	struct hpz_msg_range	 rng;
	unsigned int		 i, mode;
	static const char *const names[] = {
		"s-real-hostile-state", "s-loop-hostile-state"
	};

	for (mode = 0; mode < 2; mode++) {
		mk_start(&b, MK_SESSION | MK_REAL_UFFD | (mode ? MK_LOOP : 0));
		reg = mk_register(1, 0, 16 * PG, HPZ_DISCARD);
		mk_record(&b, &reg, sizeof(reg), FDS_DEFAULT);
		/* BUSY bits on every page, then touch them all. */
		mk_act_start(&a);
		for (i = 0; i < 16; i++)
			mk_act(&a, MK_ACT_STATE, i, 0x80 | (i & 3));
		for (i = 0; i < 16; i++)
			mk_act(&a, MK_ACT_TOUCH, i, i);
		mk_record(&b, a.b, a.n, FDS_DEFAULT);
		/* Written, reset under BUSY bits, touched and dropped. */
		rng = mk_range(HPZ_MSG_RESET, 2, 0, 16 * PG);
		mk_record(&b, &rng, sizeof(rng), FDS_DEFAULT);
		mk_act_start(&a);
		for (i = 0; i < 16; i++) {
			mk_act(&a, MK_ACT_STATE, i, 0xc1);
			mk_act(&a, MK_ACT_TOUCH, i, 1);
			mk_act(&a, MK_ACT_DROP, i, 0);
			mk_act(&a, MK_ACT_HEADER, i * 4, 0xff);
		}
		mk_record(&b, a.b, a.n, FDS_DEFAULT);
		rng = mk_range(HPZ_MSG_RESET, 3, 0, 16 * PG);
		mk_record(&b, &rng, sizeof(rng), FDS_DEFAULT);
		rng = mk_range(HPZ_MSG_SCRUB, 4, 0, 16 * PG);
		mk_record(&b, &rng, sizeof(rng), FDS_DEFAULT);
		/* Values that are no state at all, the header scrambled. */
		mk_act_start(&a);
		for (i = 0; i < 16; i++) {
			mk_act(&a, MK_ACT_STATE, i, 0x3d + i * 17);
			mk_act(&a, MK_ACT_TOUCH, 15 - i, 2);
		}
		for (i = 0; i < 88; i += 8)
			mk_act(&a, MK_ACT_HEADER, i, 0x5a);
		mk_record(&b, a.b, a.n, FDS_DEFAULT);
		rng = mk_range(HPZ_MSG_UNREGISTER, 5, 0, 16 * PG);
		mk_record(&b, &rng, sizeof(rng), FDS_DEFAULT);
		mk_write(&b, names[mode]);
	}
}

static void
mk_session_inputs(void)
{
	struct mk_buf		 b;
	struct hpz_msg_register	 reg;
	struct hpz_msg_range	 rng;
	struct hpz_msg_policy	 pol;
	struct hpz_msg_header	 st;
	struct hpz_msg_regions	 rg;
	int			 fds;

	mk_start(&b, MK_SESSION);
	st = mk_status(1);
	mk_record(&b, &st, sizeof(st), FDS_DEFAULT);
	rg = mk_regions(2, 0);
	mk_record(&b, &rg, sizeof(rg), FDS_DEFAULT);
	mk_write(&b, "s-status-regions");

	/* No userfaultfd: the register is refused, the rest find nothing. */
	mk_start(&b, MK_SESSION);
	reg = mk_register(1, 0x7f0000000000ULL, 16 * PG, HPZ_DISCARD);
	mk_record(&b, &reg, sizeof(reg), FDS_DEFAULT);
	rng = mk_range(HPZ_MSG_RESET, 2, 0x7f0000000000ULL, PG);
	mk_record(&b, &rng, sizeof(rng), FDS_DEFAULT);
	rng = mk_range(HPZ_MSG_UNREGISTER, 3, 0x7f0000000000ULL, 16 * PG);
	mk_record(&b, &rng, sizeof(rng), FDS_DEFAULT);
	mk_write(&b, "s-fake-lifecycle");

	/* A real region, used every way, then unregistered. */
	mk_start(&b, MK_SESSION | MK_REAL_UFFD);
	reg = mk_register(1, 0, 8 * PG, HPZ_DISCARD);
	mk_record(&b, &reg, sizeof(reg), FDS_DEFAULT);
	rng = mk_range(HPZ_MSG_RESET, 2, 0, 4 * PG);
	mk_record(&b, &rng, sizeof(rng), FDS_DEFAULT);
	rng = mk_range(HPZ_MSG_SCRUB, 3, PG, PG);
	mk_record(&b, &rng, sizeof(rng), FDS_DEFAULT);
	pol = mk_policy(4, 0, 8 * PG, HPZ_PREMAP | HPZ_NO_SCRUB, 2);
	mk_record(&b, &pol, sizeof(pol), FDS_DEFAULT);
	rg = mk_regions(5, 0);
	mk_record(&b, &rg, sizeof(rg), FDS_DEFAULT);
	st = mk_status(6);
	mk_record(&b, &st, sizeof(st), FDS_DEFAULT);
	rng = mk_range(HPZ_MSG_UNREGISTER, 7, 0, 8 * PG);
	mk_record(&b, &rng, sizeof(rng), FDS_DEFAULT);
	mk_write(&b, "s-real-lifecycle");

	/* Two regions, an overlapping third, and the client goes. */
	mk_start(&b, MK_SESSION | MK_REAL_UFFD);
	reg = mk_register(1, 0, 4 * PG, 0);
	mk_record(&b, &reg, sizeof(reg), FDS_DEFAULT);
	reg = mk_register(2, 8 * PG, 4 * PG, HPZ_AHEAD_EAGER);
	mk_record(&b, &reg, sizeof(reg), FDS_DEFAULT);
	reg = mk_register(3, 2 * PG, 8 * PG, HPZ_DISCARD);
	mk_record(&b, &reg, sizeof(reg), FDS_DEFAULT);
	rg = mk_regions(4, 1);
	mk_record(&b, &rg, sizeof(rg), FDS_DEFAULT);
	mk_write(&b, "s-real-overlap");

	/* Register with every wrong choice of fds: refused, then dropped. */
	mk_start(&b, MK_SESSION | MK_REAL_UFFD);
	for (fds = FDS_FAKE; fds <= FDS_READ_ONLY; fds++) {
		reg = mk_register((uint32_t)fds, 0, 2 * PG, 0);
		mk_record(&b, &reg, sizeof(reg), fds);
	}
	reg = mk_register(FDS_FLOOD, 0, 2 * PG, 0);
	mk_record(&b, &reg, sizeof(reg), FDS_FLOOD);
	mk_write(&b, "s-real-fds");
	mk_start(&b, MK_SESSION | MK_REAL_UFFD);
	reg = mk_register(1, 0, 2 * PG, 0);
	mk_record(&b, &reg, sizeof(reg), FDS_UFFD);
	mk_write(&b, "s-real-one-fd");

	/* Absolute addresses left as they are: nothing found. */
	mk_start(&b, MK_SESSION | MK_REAL_UFFD | MK_RAW);
	reg = mk_register(1, 0x7f0000000000ULL, 2 * PG, 0);
	mk_record(&b, &reg, sizeof(reg), FDS_DEFAULT);
	rng = mk_range(HPZ_MSG_RESET, 2, 0x7f0000000000ULL, PG);
	mk_record(&b, &rng, sizeof(rng), FDS_DEFAULT);
	mk_write(&b, "s-real-raw");

	/* Refused fields keep the client; bad framing drops it. */
	mk_start(&b, MK_SESSION);
	pol = mk_policy(1, 0x1000, PG, 0x8000, 1);
	mk_record(&b, &pol, sizeof(pol), FDS_DEFAULT);
	st = mk_status(2);
	mk_record(&b, &st, sizeof(st), FDS_DEFAULT);
	st.magic = 0;
	mk_record(&b, &st, sizeof(st), FDS_DEFAULT);
	st = mk_status(4);
	mk_record(&b, &st, sizeof(st), FDS_DEFAULT);
	mk_write(&b, "s-refuse-then-drop");

	/* fds with a request that takes none. */
	mk_start(&b, MK_SESSION);
	st = mk_status(1);
	mk_record(&b, &st, sizeof(st), FDS_FAKE);
	mk_write(&b, "s-status-fds");

	/* Per-uid limits: bytes, then regions. */
	mk_start(&b, MK_SESSION | MK_REAL_UFFD | MK_LIMITS);
	reg = mk_register(1, 0, 4 * PG, 0);
	mk_record(&b, &reg, sizeof(reg), FDS_DEFAULT);
	reg = mk_register(2, 4 * PG, 4 * PG, 0);
	mk_record(&b, &reg, sizeof(reg), FDS_DEFAULT);
	reg = mk_register(3, 8 * PG, 2 * PG, 0);
	mk_record(&b, &reg, sizeof(reg), FDS_DEFAULT);
	reg = mk_register(4, 12 * PG, 2 * PG, 0);
	mk_record(&b, &reg, sizeof(reg), FDS_DEFAULT);
	mk_write(&b, "s-real-limits");

	/* Over the socket: a region's life, then too many fds. */
	mk_start(&b, MK_SESSION | MK_REAL_UFFD | MK_WIRE);
	reg = mk_register(1, 0, 4 * PG, HPZ_DISCARD);
	mk_record(&b, &reg, sizeof(reg), FDS_DEFAULT);
	rng = mk_range(HPZ_MSG_RESET, 2, 0, 4 * PG);
	mk_record(&b, &rng, sizeof(rng), FDS_DEFAULT);
	st = mk_status(3);
	mk_record(&b, &st, sizeof(st), FDS_DEFAULT);
	rng = mk_range(HPZ_MSG_UNREGISTER, 4, 0, 4 * PG);
	mk_record(&b, &rng, sizeof(rng), FDS_DEFAULT);
	reg = mk_register(5, 0, 4 * PG, 0);
	mk_record(&b, &reg, sizeof(reg), FDS_FLOOD);
	mk_write(&b, "s-wire-lifecycle");

	/* The daemon's own loop: a region's life, then hang up holding one. */
	mk_start(&b, MK_SESSION | MK_REAL_UFFD | MK_LOOP);
	reg = mk_register(1, 0, 4 * PG, HPZ_DISCARD);
	mk_record(&b, &reg, sizeof(reg), FDS_DEFAULT);
	rng = mk_range(HPZ_MSG_RESET, 2, 0, 4 * PG);
	mk_record(&b, &rng, sizeof(rng), FDS_DEFAULT);
	rng = mk_range(HPZ_MSG_SCRUB, 3, 0, 4 * PG);
	mk_record(&b, &rng, sizeof(rng), FDS_DEFAULT);
	rng = mk_range(HPZ_MSG_UNREGISTER, 4, 0, 4 * PG);
	mk_record(&b, &rng, sizeof(rng), FDS_DEFAULT);
	reg = mk_register(5, 8 * PG, 4 * PG, 0);
	mk_record(&b, &reg, sizeof(reg), FDS_DEFAULT);
	rg = mk_regions(6, 0);
	mk_record(&b, &rg, sizeof(rg), FDS_DEFAULT);
	mk_write(&b, "s-loop-lifecycle");

	/* The daemon's own loop: too many fds. */
	mk_start(&b, MK_SESSION | MK_LOOP);
	st = mk_status(1);
	mk_record(&b, &st, sizeof(st), FDS_DEFAULT);
	reg = mk_register(2, 0x7f0000000000ULL, 4 * PG, 0);
	mk_record(&b, &reg, sizeof(reg), FDS_FLOOD);
	mk_write(&b, "s-loop-flood");

	/* Over the socket: an oversized message. */
	mk_start(&b, MK_SESSION | MK_WIRE);
	{
		unsigned char	big[HPZ_MSG_MAX + 64];

		memset(big, 0, sizeof(big));
		st = mk_status(1);
		memcpy(big, &st, sizeof(st));
		mk_record(&b, big, sizeof(big), FDS_DEFAULT);
	}
	mk_write(&b, "s-wire-oversized");

	/* Nobody reads the replies. */
	mk_start(&b, MK_SESSION | MK_REAL_UFFD | MK_PEER_GONE);
	reg = mk_register(1, 0, 4 * PG, 0);
	mk_record(&b, &reg, sizeof(reg), FDS_DEFAULT);
	mk_write(&b, "s-peer-gone");
}

int
main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: mkcorpus directory\n");
		return (2);
	}
	mk_dir = argv[1];
	mk_decoder_inputs();
	mk_session_inputs();
	mk_hostile_inputs();
	printf("mkcorpus: %d inputs in %s\n", mk_files, mk_dir);
	return (0);
}
