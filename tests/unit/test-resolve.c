/*
 * test-resolve.c - unit tests of the page-resolve transaction (resolve.c)
 * with fake operations: every page state x fault kind x outcome (mapped,
 * EEXIST, EFAULT, EAGAIN, SIGBUS in the clear, a failed allocation), the
 * order of the steps and the state byte a crash would find at each, a
 * reset while a page is held, BUSY bits nobody of ours set, pages another
 * transaction holds (parked, never waited for), coalesced runs that stop
 * part way, and the count of garbage pages.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "resolve.h"

#define NPAGES		16
#define nitems(a)	(sizeof(a) / sizeof((a)[0]))

/* What the fake operations do, and what they saw. */
struct fake {
	struct resolve_table	*t;
	int			 populate_err[4];	/* per call, then 0 */
	int			 npopulate;
	int			 clear_err;
	int			 nclear;
	int			 map_err[4];		/* per call, then 0 */
	uint64_t		 map_done[4];		/* pages before it */
	int			 nmap;
	int			 nwake;
	uint64_t		 woke[8];
	uint8_t			 at_map[NPAGES];	/* bytes at first map */
	int			 want;			/* want_map answer */
	char			 steps[32];		/* P C M W, in order */
	size_t			 nsteps;
	void			(*hook)(struct fake *, char step);
};

static void
fake_step(struct fake *f, char c)
{
	if (f->nsteps < sizeof(f->steps) - 1)
		f->steps[f->nsteps++] = c;
	if (f->hook != NULL)
		f->hook(f, c);
}

static int
fake_populate(struct resolve *rs, uint64_t idx, uint64_t n)
{
	struct fake	*f = rs->arg;
	int		 i = f->npopulate++;

	(void)idx;
	(void)n;
	fake_step(f, 'P');
	return (i < (int)nitems(f->populate_err) ? f->populate_err[i] : 0);
}

static int
fake_clear(struct resolve *rs, uint64_t lo, uint64_t n)
{
	struct fake	*f = rs->arg;

	(void)lo;
	(void)n;
	f->nclear++;
	fake_step(f, 'C');
	return (f->clear_err);
}

static int
fake_map(struct resolve *rs, uint64_t idx, uint64_t n, uint64_t *done)
{
	struct fake	*f = rs->arg;
	int		 i = f->nmap++, error;
	uint64_t	 k;

	if (i == 0)
		for (k = 0; k < NPAGES; k++)
			f->at_map[k] = atomic_load(&f->t->state[k]);
	fake_step(f, 'M');
	error = i < (int)nitems(f->map_err) ? f->map_err[i] : 0;
	*done = error == 0 ? n : i < (int)nitems(f->map_done) ?
	    f->map_done[i] : 0;
	(void)idx;
	return (error);
}

static void
fake_wake(struct resolve *rs, uint64_t idx, uint64_t n)
{
	struct fake	*f = rs->arg;

	(void)n;
	if (f->nwake < (int)nitems(f->woke))
		f->woke[f->nwake] = idx;
	f->nwake++;
	fake_step(f, 'W');
}

static int
fake_want(struct resolve *rs, uint8_t was, int cleared)
{
	struct fake	*f = rs->arg;

	(void)was;
	(void)cleared;
	return (f->want);
}

static const struct resolve_ops fake_ops = {
	fake_populate, fake_clear, fake_map, fake_wake, NULL
};
static const struct resolve_ops fake_ops_want = {
	fake_populate, fake_clear, fake_map, fake_wake, fake_want
};

static _Atomic uint8_t		 pages[NPAGES];
static struct resolve_table	 table;

static void
setup_table(uint8_t fill, uint64_t garbage)
{
	size_t	i;

	for (i = 0; i < NPAGES; i++)
		atomic_init(&pages[i], fill);
	resolve_table_init(&table, pages, NPAGES, garbage);
}

static void
fake_init(struct fake *f)
{
	memset(f, 0, sizeof(*f));
	f->t = &table;
	f->want = 1;
}

/* --- every state x kind x outcome ---------------------------------------- */

enum outcome {
	OUT_MAPPED,		/* the map goes through */
	OUT_EEXIST,		/* mapped already */
	OUT_EFAULT,		/* not in the file: refilled, then mapped */
	OUT_EFAULT_AGAIN,	/* not in the file even after the refill */
	OUT_EAGAIN,		/* the mm is changing */
	OUT_SIGBUS,		/* the clear's write refused */
	OUT_NOPAGE,		/* the allocation fails */
	OUT_N
};

static const char *const outcome_names[] = {
	"mapped", "EEXIST", "EFAULT", "EFAULT twice", "EAGAIN", "SIGBUS",
	"no page"
};

/* What the rules say must happen. */
struct expect {
	const char		*steps;
	enum resolve_result	 result;
	uint8_t			 final;
	int			 error;
};

/* An outcome as it can happen for an action (or what it turns into). */
static enum outcome
effective(enum outcome o, enum page_action a, enum fault_kind kind)
{
	if (o == OUT_SIGBUS && a != ACTION_CLEAR)
		return (OUT_MAPPED);	/* nothing cleared: cannot happen */
	if (o == OUT_NOPAGE && a == ACTION_MAP)
		return (OUT_EFAULT_AGAIN); /* the refill: its only allocation */
	if (o == OUT_NOPAGE && a == ACTION_CLEAR && kind == FAULT_MINOR)
		return (OUT_MAPPED);	/* the page is there: no allocation */
	return (o);
}

static struct expect
expected(uint8_t was, enum fault_kind kind, enum outcome o)
{
	struct expect	e = { "", RESOLVE_DONE, PAGE_MAPPED, 0 };
	enum page_action a = state_fault_action(was, kind);
	const char	*pre;
	static char	 buf[32];
	uint8_t		 cleared = a == ACTION_MAP ? was : PAGE_ZEROED;

	pre = a == ACTION_POPULATE ? "P" : a == ACTION_MAP ? "" :
	    kind == FAULT_MISSING ? "PC" : "C";
	switch (o) {
	case OUT_MAPPED:
		snprintf(buf, sizeof(buf), "%sM", pre);
		break;
	case OUT_EEXIST:
		snprintf(buf, sizeof(buf), "%sMW", pre);
		/* Garbage when claimed and mapped already: stays garbage. */
		e.final = was == PAGE_GARBAGE ? PAGE_GARBAGE : PAGE_MAPPED;
		break;
	case OUT_EFAULT:
		snprintf(buf, sizeof(buf), "%sMPM", pre);
		break;
	case OUT_EFAULT_AGAIN:
		snprintf(buf, sizeof(buf), "%sMP%s", pre,
		    a == ACTION_MAP ? "" : "M");
		e.result = RESOLVE_FAILED;
		e.final = cleared;
		e.error = a == ACTION_MAP ? -ENOMEM : -EFAULT;
		break;
	case OUT_EAGAIN:
		snprintf(buf, sizeof(buf), "%sM", pre);
		e.result = RESOLVE_RETRY;
		e.final = cleared;
		break;
	case OUT_SIGBUS:
		snprintf(buf, sizeof(buf), "%s", pre);
		e.result = RESOLVE_LOST;
		e.final = PAGE_GARBAGE;
		e.error = -EFAULT;
		break;
	case OUT_NOPAGE:
		snprintf(buf, sizeof(buf), "P");
		e.result = RESOLVE_FAILED;
		e.final = was;
		e.error = -ENOMEM;
		break;
	case OUT_N:
		break;
	}
	e.steps = buf;
	return (e);
}

static void
script(struct fake *f, enum outcome o, enum page_action a)
{
	switch (o) {
	case OUT_MAPPED:
		break;
	case OUT_EEXIST:
		f->map_err[0] = -EEXIST;
		break;
	case OUT_EFAULT:
		f->map_err[0] = -EFAULT;
		break;
	case OUT_EFAULT_AGAIN:
		f->map_err[0] = -EFAULT;
		f->map_err[1] = -EFAULT;
		/* A page that was data: the refill itself finds no page. */
		if (a == ACTION_MAP)
			f->populate_err[0] = -ENOMEM;
		break;
	case OUT_EAGAIN:
		f->map_err[0] = -EAGAIN;
		break;
	case OUT_SIGBUS:
		f->clear_err = -EFAULT;
		break;
	case OUT_NOPAGE:
		if (a == ACTION_MAP) {
			f->map_err[0] = -EFAULT;
			f->map_err[1] = -EFAULT;
		}
		f->populate_err[0] = -ENOMEM;
		break;
	case OUT_N:
		break;
	}
}

static void
check_one(uint8_t was, enum fault_kind kind, enum outcome o, int tampered)
{
	struct resolve	rs;
	struct fake	f;
	struct expect	e;
	enum page_action a = state_fault_action(was, kind);
	uint8_t		before;
	char		what[128];

	setup_table(PAGE_KEEP, was == PAGE_GARBAGE ? 1 : 0);
	before = (uint8_t)(was | (tampered ? PAGE_BUSY : 0));
	atomic_store(&pages[5], before);
	fake_init(&f);
	o = effective(o, a, kind);
	script(&f, o, a);
	e = expected(was, kind, o);
	snprintf(what, sizeof(what), "%s%s, %s fault, %s",
	    state_name(was), tampered ? "|BUSY (not ours)" : "",
	    kind == FAULT_MINOR ? "minor" : "missing", outcome_names[o]);

	resolve_begin(&rs, &table, &fake_ops, &f, kind, 0);
	cr_assert_eq(resolve_claim(&rs, 5, 100, NULL), RESOLVE_CLAIMED,
	    "%s: a BUSY bit nobody of ours set was waited for", what);
	cr_assert_eq(rs.action, a, "%s", what);
	cr_assert_eq(rs.tampered, tampered, "%s", what);
	cr_assert_eq(atomic_load(&table.tampered), (uint64_t)tampered);
	cr_assert_eq(atomic_load(&pages[5]), was | PAGE_BUSY,
	    "%s: the claim's crash record", what);
	resolve_run(&rs);

	cr_expect_str_eq(f.steps, e.steps, "%s: steps", what);
	cr_expect_eq(rs.result[0], e.result, "%s: %s, want %s", what,
	    resolve_result_name(rs.result[0]), resolve_result_name(e.result));
	cr_expect_eq(atomic_load(&pages[5]), e.final, "%s: state %s, want %s",
	    what, state_name(atomic_load(&pages[5])), state_name(e.final));
	cr_expect_eq(rs.error, e.error, "%s: error %d, want %d", what,
	    rs.error, e.error);
	/* Cleared before mapped, and what a crash at the map would find. */
	if (f.nmap > 0) {
		cr_expect_eq(f.at_map[5], (a == ACTION_MAP ? was :
		    PAGE_ZEROED) | PAGE_BUSY, "%s: byte 0x%02x at the map", what,
		    f.at_map[5]);
		/* A crash once a map may have happened never clears it. */
		cr_expect_neq(state_recovered(f.at_map[5]), PAGE_GARBAGE,
		    "%s: a crash at the map", what);
	}
	/* Nothing but garbage is ever cleared. */
	cr_expect_eq(f.nclear > 0, was == PAGE_GARBAGE && o != OUT_NOPAGE,
	    "%s: cleared %d times", what, f.nclear);
	cr_expect_eq(resolve_garbage(&table), e.final == PAGE_GARBAGE ? 1 : 0,
	    "%s: garbage count %llu", what,
	    (unsigned long long)resolve_garbage(&table));
	/* The other pages are untouched, the table empty. */
	cr_expect_eq(atomic_load(&pages[4]), PAGE_KEEP);
	cr_expect_eq(atomic_load(&pages[6]), PAGE_KEEP);
	cr_expect(TAILQ_EMPTY(&table.holds));
	resolve_table_destroy(&table);
}

Test(resolve, every_state_kind_and_outcome)
{
	static const uint8_t	states[] = { PAGE_KEEP, PAGE_GARBAGE,
				    PAGE_ZEROED, PAGE_MAPPED };
	size_t			s;
	int			o, k, tamp;

	for (s = 0; s < nitems(states); s++)
		for (k = 0; k < 2; k++)
			for (o = 0; o < OUT_N; o++)
				for (tamp = 0; tamp < 2; tamp++)
					check_one(states[s], k ? FAULT_MINOR :
					    FAULT_MISSING, (enum outcome)o, tamp);
}

/* Bytes a client may write that are no state at all: data, never zeroed. */
Test(resolve, unknown_state_values_are_data)
{
	struct resolve	rs;
	struct fake	f;
	unsigned int	v;

	for (v = 0; v < 256; v++) {
		if ((v & PAGE_STATE_MASK) <= PAGE_MAPPED)
			continue;
		setup_table((uint8_t)v, 0);
		fake_init(&f);
		resolve_begin(&rs, &table, &fake_ops, &f, FAULT_MINOR, 0);
		cr_assert_eq(resolve_claim(&rs, 0, 0, NULL), RESOLVE_CLAIMED);
		resolve_run(&rs);
		cr_expect_eq(f.nclear, 0, "byte 0x%02x cleared", v);
		cr_expect_eq(rs.result[0], RESOLVE_DONE);
		cr_expect_eq(atomic_load(&pages[0]), PAGE_MAPPED);
		resolve_table_destroy(&table);
	}
}

/* --- a reset while the page is held ------------------------------------- */

static uint64_t	hook_flagged;
static uint8_t	hook_byte;

static void
reset_at(struct fake *f, char step)
{
	if (step == 'M' && f->nmap == 1) {
		hook_flagged = resolve_reset(f->t, 0, NPAGES);
		hook_byte = atomic_load(&f->t->state[3]);
	}
}

static void
reset_at_clear(struct fake *f, char step)
{
	if (step == 'C')
		hook_flagged = resolve_reset(f->t, 3, 1);
}

Test(resolve, reset_while_held_wins)
{
	struct resolve	rs;
	struct fake	f;
	size_t		i;

	/* A data page being mapped when the reset comes: garbage after. */
	setup_table(PAGE_MAPPED, 0);
	fake_init(&f);
	f.hook = reset_at;
	resolve_begin(&rs, &table, &fake_ops, &f, FAULT_MINOR, 0);
	cr_assert_eq(resolve_claim(&rs, 3, 0, NULL), RESOLVE_CLAIMED);
	resolve_run(&rs);
	cr_assert_eq(hook_flagged, 1, "the reset did not see the hold");
	cr_assert_eq(hook_byte, PAGE_GARBAGE | PAGE_BUSY | PAGE_RESET,
	    "the crash record of a reset while held");
	cr_assert_eq(state_recovered(hook_byte), PAGE_GARBAGE);
	cr_assert_eq(rs.result[0], RESOLVE_DONE);
	cr_assert(rs.resets_done, "the reset's answer was not released");
	cr_assert_eq(resolve_resets_pending(&table), 0);
	for (i = 0; i < NPAGES; i++)
		cr_assert_eq(atomic_load(&pages[i]), PAGE_GARBAGE, "page %zu",
		    i);
	cr_assert_eq(resolve_garbage(&table), NPAGES);
	resolve_table_destroy(&table);

	/* During the clear: the cleared mark keeps the reset for a crash. */
	setup_table(PAGE_GARBAGE, NPAGES);
	fake_init(&f);
	f.hook = reset_at_clear;
	resolve_begin(&rs, &table, &fake_ops, &f, FAULT_MINOR, 0);
	cr_assert_eq(resolve_claim(&rs, 3, 0, NULL), RESOLVE_CLAIMED);
	resolve_run(&rs);
	cr_assert_eq(hook_flagged, 1);
	cr_assert_eq(f.at_map[3], PAGE_ZEROED | PAGE_BUSY | PAGE_RESET);
	cr_assert_eq(state_recovered(f.at_map[3]), PAGE_GARBAGE,
	    "a crash after the reset would count it as data");
	cr_assert_eq(atomic_load(&pages[3]), PAGE_GARBAGE);
	cr_assert_eq(resolve_garbage(&table), NPAGES);
	resolve_table_destroy(&table);
}

static void
reset_one_at_map(struct fake *f, char step)
{
	if (step == 'M' && f->nmap == 1)
		hook_flagged = resolve_reset(f->t, 5, 1);
}

/*
 * A run of four garbage pages (coalesced faults) being mapped when a reset
 * names one of them: that one is garbage after, the other three are the
 * client's: they stay mapped in it (the reset zaps its own page only) and
 * what the client writes there is data.  Found by tests/stress: with the
 * whole run made garbage, the scrub later zeroed the client's writes.
 */
Test(resolve, reset_of_one_page_leaves_the_rest_of_the_run)
{
	struct resolve	rs;
	struct fake	f;
	uint64_t	i;

	setup_table(PAGE_GARBAGE, NPAGES);
	fake_init(&f);
	f.hook = reset_one_at_map;
	resolve_begin(&rs, &table, &fake_ops, &f, FAULT_MINOR, 0);
	cr_assert_eq(resolve_claim(&rs, 4, 0, NULL), RESOLVE_CLAIMED);
	cr_assert_eq(resolve_extend(&rs, 5, 0), 1);
	cr_assert_eq(resolve_extend(&rs, 3, 0), 1, "prepend");
	cr_assert_eq(resolve_extend(&rs, 6, 0), 1);
	resolve_run(&rs);
	cr_assert_eq(hook_flagged, 1, "the reset did not see the hold");
	cr_assert(rs.resets_done);
	for (i = 3; i < 7; i++)
		cr_assert_eq(atomic_load(&pages[i]), i == 5 ? PAGE_GARBAGE :
		    PAGE_MAPPED, "page %llu: 0x%02x", (unsigned long long)i,
		    atomic_load(&pages[i]));
	cr_assert_eq(resolve_garbage(&table), NPAGES - 3);
	resolve_table_destroy(&table);
}

/* The answer waits for every hold the reset saw, and only for those. */
Test(resolve, reset_pending_counts_holds)
{
	struct resolve	a, b;
	struct fake	fa, fb;

	setup_table(PAGE_MAPPED, 0);
	fake_init(&fa);
	fake_init(&fb);
	resolve_begin(&a, &table, &fake_ops, &fa, FAULT_MINOR, 0);
	resolve_begin(&b, &table, &fake_ops, &fb, FAULT_MINOR, 0);
	cr_assert_eq(resolve_claim(&a, 2, 0, NULL), RESOLVE_CLAIMED);
	cr_assert_eq(resolve_claim(&b, 9, 0, NULL), RESOLVE_CLAIMED);
	cr_assert_eq(resolve_reset(&table, 0, 4), 1);
	cr_assert_eq(resolve_reset(&table, 0, 4), 0, "flagged twice");
	cr_assert_eq(resolve_resets_pending(&table), 1);
	resolve_run(&b);
	cr_assert_not(b.resets_done);
	cr_assert_eq(atomic_load(&pages[9]), PAGE_MAPPED);
	cr_assert_eq(resolve_resets_pending(&table), 1);
	resolve_run(&a);
	cr_assert(a.resets_done);
	cr_assert_eq(resolve_resets_pending(&table), 0);
	cr_assert_eq(atomic_load(&pages[2]), PAGE_GARBAGE);
	cr_assert_eq(resolve_garbage(&table), 4);
	resolve_table_destroy(&table);
}

/* --- BUSY bits a client wrote --------------------------------------------- */

Test(resolve, busy_bits_nobody_set_are_never_waited_for)
{
	struct resolve	rs;
	struct fake	f;
	size_t		i;

	setup_table(PAGE_MAPPED | PAGE_BUSY, 0);
	/* A reset over them: done at once, nothing pending. */
	cr_assert_eq(resolve_reset(&table, 0, NPAGES), 0);
	cr_assert_eq(resolve_resets_pending(&table), 0);
	for (i = 0; i < NPAGES; i++)
		cr_assert_eq(atomic_load(&pages[i]), PAGE_GARBAGE);
	cr_assert_eq(resolve_garbage(&table), NPAGES);
	/* And a fault on one: served as its state says, counted. */
	atomic_store(&pages[7], PAGE_GARBAGE | PAGE_BUSY | PAGE_RESET);
	fake_init(&f);
	resolve_begin(&rs, &table, &fake_ops, &f, FAULT_MINOR, 0);
	cr_assert_eq(resolve_claim(&rs, 7, 0, NULL), RESOLVE_CLAIMED);
	cr_assert_eq(rs.tampered, 1);
	resolve_run(&rs);
	cr_assert_str_eq(f.steps, "CM");
	cr_assert_eq(atomic_load(&pages[7]), PAGE_MAPPED);
	cr_assert_eq(resolve_garbage(&table), NPAGES - 1);
	resolve_table_destroy(&table);
}

/* --- pages another transaction holds ------------------------------------- */

Test(resolve, held_page_parks_and_comes_back)
{
	struct resolve		a, b, c;
	struct resolve_waiter	w1, w2, *got;
	struct fake		fa, fb, fc;

	setup_table(PAGE_ZEROED, 0);
	fake_init(&fa);
	fake_init(&fb);
	fake_init(&fc);
	resolve_begin(&a, &table, &fake_ops, &fa, FAULT_MINOR, 0);
	resolve_begin(&b, &table, &fake_ops, &fb, FAULT_MINOR, 0);
	resolve_begin(&c, &table, &fake_ops, &fc, FAULT_MINOR, 0);
	cr_assert_eq(resolve_claim(&a, 4, 0, NULL), RESOLVE_CLAIMED);
	cr_assert_eq(resolve_claim(&b, 4, 0, &w1), RESOLVE_HELD);
	cr_assert_eq(resolve_claim(&c, 4, 0, NULL), RESOLVE_HELD,
	    "a caller that may not wait is told, not parked");
	cr_assert_eq(atomic_load(&table.nwaiting), 1);
	/* Another page of the same table is not held. */
	cr_assert_eq(resolve_claim(&c, 5, 0, NULL), RESOLVE_CLAIMED);
	cr_assert_eq(resolve_extend(&c, 4, 0), 0, "extended into a hold");
	cr_assert_eq(resolve_extend(&c, 6, 0), 1);
	cr_assert_eq(c.hold.lo, 5);
	cr_assert_eq(c.hold.n, 2);
	cr_assert_eq(resolve_extend(&c, 8, 0), 0, "not adjacent");
	resolve_begin(&b, &table, &fake_ops, &fb, FAULT_MINOR, 0);
	cr_assert_eq(resolve_claim(&b, 6, 0, &w2), RESOLVE_HELD);
	resolve_run(&a);
	got = TAILQ_FIRST(&a.woken);
	cr_assert_eq(got, &w1, "the parked fault did not come back");
	cr_assert_null(TAILQ_NEXT(got, entry), "a fault on another page too");
	resolve_run(&c);
	cr_assert_eq(TAILQ_FIRST(&c.woken), &w2);
	cr_assert_eq(atomic_load(&table.nwaiting), 0);
	cr_assert(TAILQ_EMPTY(&table.holds));
	resolve_table_destroy(&table);
}

Test(resolve, extend_needs_the_same_action)
{
	struct resolve	rs;
	struct fake	f;

	setup_table(PAGE_GARBAGE, NPAGES);
	atomic_store(&pages[3], PAGE_MAPPED);
	fake_init(&f);
	resolve_begin(&rs, &table, &fake_ops, &f, FAULT_MINOR, 0);
	cr_assert_eq(resolve_claim(&rs, 5, 11, NULL), RESOLVE_CLAIMED);
	cr_assert_eq(resolve_extend(&rs, 4, 22), 1);
	cr_assert_eq(resolve_extend(&rs, 3, 33), 0, "data joined a clear");
	cr_assert_eq(atomic_load(&pages[3]), PAGE_MAPPED,
	    "a page not taken was changed");
	cr_assert_eq(resolve_extend(&rs, 6, 44), 1);
	cr_assert_eq(rs.hold.lo, 4);
	cr_assert_eq(rs.off[0], 22);
	cr_assert_eq(rs.off[1], 11);
	cr_assert_eq(rs.off[2], 44);
	resolve_run(&rs);
	cr_assert_str_eq(f.steps, "CM");
	cr_assert_eq(atomic_load(&pages[4]), PAGE_MAPPED);
	cr_assert_eq(atomic_load(&pages[6]), PAGE_MAPPED);
	cr_assert_eq(resolve_garbage(&table), NPAGES - 3);
	resolve_table_destroy(&table);
}

/* --- a run that stops part way -------------------------------------------- */

Test(resolve, run_maps_past_a_page_mapped_already)
{
	struct resolve	rs;
	struct fake	f;
	uint64_t	i;

	setup_table(PAGE_GARBAGE, NPAGES);
	fake_init(&f);
	f.map_err[0] = -EEXIST;
	f.map_done[0] = 1;
	resolve_begin(&rs, &table, &fake_ops, &f, FAULT_MINOR, 0);
	cr_assert_eq(resolve_claim(&rs, 0, 0, NULL), RESOLVE_CLAIMED);
	for (i = 1; i < 4; i++)
		cr_assert_eq(resolve_extend(&rs, i, 0), 1);
	resolve_run(&rs);
	cr_assert_str_eq(f.steps, "CMWM");
	cr_assert_eq(f.nwake, 1);
	cr_assert_eq(f.woke[0], 1, "woke page %llu",
	    (unsigned long long)f.woke[0]);
	for (i = 0; i < 4; i++)
		cr_assert_eq(rs.result[i], RESOLVE_DONE);
	cr_assert_eq(atomic_load(&pages[0]), PAGE_MAPPED);
	cr_assert_eq(atomic_load(&pages[1]), PAGE_GARBAGE,
	    "a garbage page mapped from before its reset became data");
	cr_assert_eq(atomic_load(&pages[2]), PAGE_MAPPED);
	cr_assert_eq(atomic_load(&pages[3]), PAGE_MAPPED);
	cr_assert_eq(resolve_garbage(&table), NPAGES - 3);
	resolve_table_destroy(&table);
}

Test(resolve, run_retries_what_the_mm_refused)
{
	struct resolve	rs;
	struct fake	f;
	uint64_t	i;

	setup_table(PAGE_GARBAGE, NPAGES);
	fake_init(&f);
	f.map_err[0] = -EAGAIN;
	f.map_done[0] = 2;
	resolve_begin(&rs, &table, &fake_ops, &f, FAULT_MINOR, 0);
	cr_assert_eq(resolve_claim(&rs, 8, 0, NULL), RESOLVE_CLAIMED);
	for (i = 9; i < 12; i++)
		cr_assert_eq(resolve_extend(&rs, i, 0), 1);
	resolve_run(&rs);
	for (i = 0; i < 4; i++) {
		cr_assert_eq(rs.result[i], i < 2 ? RESOLVE_DONE :
		    RESOLVE_RETRY, "page %llu", (unsigned long long)(8 + i));
		cr_assert_eq(atomic_load(&pages[8 + i]), i < 2 ? PAGE_MAPPED :
		    PAGE_ZEROED);
	}
	/* Tried again: cleared already, so mapped without a clear. */
	fake_init(&f);
	resolve_begin(&rs, &table, &fake_ops, &f, FAULT_MINOR, 0);
	cr_assert_eq(resolve_claim(&rs, 10, 0, NULL), RESOLVE_CLAIMED);
	resolve_run(&rs);
	cr_assert_str_eq(f.steps, "M");
	cr_assert_eq(atomic_load(&pages[10]), PAGE_MAPPED);
	resolve_table_destroy(&table);
}

/* --- background use: no clear wanted, no map wanted, given up ------------ */

Test(resolve, scrub_flags)
{
	struct resolve	rs;
	struct fake	f;

	setup_table(PAGE_GARBAGE, NPAGES);
	fake_init(&f);
	resolve_begin(&rs, &table, &fake_ops, &f, FAULT_MINOR,
	    RESOLVE_NOCLEAR | RESOLVE_IDLE);
	cr_assert_eq(resolve_claim(&rs, 1, 0, NULL), RESOLVE_CLAIMED);
	resolve_run(&rs);
	cr_assert_str_eq(f.steps, "");
	cr_assert_eq(rs.result[0], RESOLVE_SKIPPED);
	cr_assert_eq(atomic_load(&pages[1]), PAGE_GARBAGE);

	/* Cleared, not mapped: ready. */
	fake_init(&f);
	f.want = 0;
	resolve_begin(&rs, &table, &fake_ops_want, &f, FAULT_MINOR, 0);
	cr_assert_eq(resolve_claim(&rs, 1, 0, NULL), RESOLVE_CLAIMED);
	resolve_run(&rs);
	cr_assert_str_eq(f.steps, "C");
	cr_assert_eq(rs.result[0], RESOLVE_READY);
	cr_assert_eq(atomic_load(&pages[1]), PAGE_ZEROED);

	/* Given up for a waiting fault: still garbage, nothing said. */
	fake_init(&f);
	f.clear_err = -EINTR;
	resolve_begin(&rs, &table, &fake_ops, &f, FAULT_MINOR, 0);
	cr_assert_eq(resolve_claim(&rs, 2, 0, NULL), RESOLVE_CLAIMED);
	resolve_run(&rs);
	cr_assert_str_eq(f.steps, "C");
	cr_assert_eq(rs.result[0], RESOLVE_SKIPPED);
	cr_assert_eq(rs.error, 0);
	cr_assert_eq(atomic_load(&pages[2]), PAGE_GARBAGE);
	cr_assert_eq(resolve_garbage(&table), NPAGES - 1);
	resolve_table_destroy(&table);
}

/* --- the count of garbage pages -------------------------------------------- */

Test(resolve, garbage_count_stays_in_range)
{
	setup_table(PAGE_KEEP, 0);
	resolve_forget_garbage(&table, 5);
	cr_assert_eq(resolve_garbage(&table), 0, "went below zero");
	resolve_table_destroy(&table);
	setup_table(PAGE_KEEP, 1000);
	cr_assert_eq(resolve_garbage(&table), NPAGES, "past npages");
	resolve_table_destroy(&table);
	setup_table(PAGE_KEEP, 0);
	cr_assert_eq(resolve_reset(&table, 4, 4), 0);
	cr_assert_eq(resolve_reset(&table, 6, 100), 0, "past the end");
	cr_assert_eq(resolve_reset(&table, 100, 1), 0);
	cr_assert_eq(resolve_garbage(&table), NPAGES - 4);
	cr_assert_eq(atomic_load(&pages[3]), PAGE_KEEP);
	resolve_table_destroy(&table);
}

/* Parked faults of a region going away come back to whoever lets it go. */
Test(resolve, cancel_takes_every_waiter)
{
	struct resolve_waiters	out = TAILQ_HEAD_INITIALIZER(out);
	struct resolve_waiter	w1, w2;
	struct resolve		a, b;
	struct fake		fa;

	setup_table(PAGE_KEEP, 0);
	fake_init(&fa);
	resolve_begin(&a, &table, &fake_ops, &fa, FAULT_MINOR, 0);
	cr_assert_eq(resolve_claim(&a, 0, 0, NULL), RESOLVE_CLAIMED);
	resolve_begin(&b, &table, &fake_ops, &fa, FAULT_MINOR, 0);
	resolve_park(&table, &w1);
	cr_assert_eq(resolve_claim(&b, 0, 0, &w2), RESOLVE_HELD);
	resolve_cancel_waiters(&table, &out);
	cr_assert_eq(TAILQ_FIRST(&out), &w1);
	cr_assert_eq(TAILQ_NEXT(&w1, entry), &w2);
	cr_assert_eq(atomic_load(&table.nwaiting), 0);
	cr_assert(TAILQ_EMPTY(&table.waiters));
	resolve_table_destroy(&table);
}
