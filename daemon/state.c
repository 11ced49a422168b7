/*
 * state.c - the per-page state machine.  Pure functions on one state byte:
 * the only code that decides whether a page may be written with zeros.
 */
#include "hpzerod.h"

/*
 * What to do for a fault.  A MISSING fault means the file has no page, so
 * the kernel will hand out a zeroed one.  A MINOR fault on a page we were
 * told is garbage needs clearing; every other present page holds data and
 * is mapped untouched.
 */
enum page_action
state_fault_action(uint8_t state, enum fault_kind kind)
{
	if (kind == FAULT_MISSING)
		return (ACTION_POPULATE);
	if ((state & PAGE_STATE_MASK) == PAGE_GARBAGE)
		return (ACTION_CLEAR);
	return (ACTION_MAP);
}

/* Take a page for one worker.  0 if another owns it, else 1 and its state. */
int
state_claim(_Atomic uint8_t *page, uint8_t *was)
{
	uint8_t	old;

	old = atomic_load_explicit(page, memory_order_acquire);
	do {
		if (old & PAGE_BUSY)
			return (0);
	} while (!atomic_compare_exchange_weak_explicit(page, &old,
	    (uint8_t)(old | PAGE_BUSY), memory_order_acq_rel,
	    memory_order_acquire));
	*was = old & PAGE_STATE_MASK;
	return (1);
}

/*
 * Give a page back with its new state.  A reset that came while the page
 * was busy wins: the page is garbage again, whatever the worker did.
 */
uint8_t
state_release(_Atomic uint8_t *page, uint8_t newstate)
{
	uint8_t	old, new;

	old = atomic_load_explicit(page, memory_order_acquire);
	do {
		if (old & PAGE_RESET)
			new = PAGE_GARBAGE;
		else
			new = newstate & PAGE_STATE_MASK;
	} while (!atomic_compare_exchange_weak_explicit(page, &old, new,
	    memory_order_acq_rel, memory_order_acquire));
	return (new);
}

/* Declare a page garbage; if a worker owns it, tell the worker. */
void
state_reset(_Atomic uint8_t *page)
{
	uint8_t	old, new;

	old = atomic_load_explicit(page, memory_order_acquire);
	do {
		if (old & PAGE_BUSY)
			new = PAGE_GARBAGE | PAGE_BUSY | PAGE_RESET;
		else
			new = PAGE_GARBAGE;
	} while (!atomic_compare_exchange_weak_explicit(page, &old, new,
	    memory_order_acq_rel, memory_order_acquire));
}

/* Must this page be dropped before the client may see it unserved? */
int
state_needs_punch(uint8_t state)
{
	return ((state & PAGE_STATE_MASK) == PAGE_GARBAGE);
}

const char *
state_name(uint8_t state)
{
	switch (state & PAGE_STATE_MASK) {
	case PAGE_KEEP:
		return ("keep");
	case PAGE_GARBAGE:
		return ("garbage");
	case PAGE_ZEROED:
		return ("zeroed");
	case PAGE_MAPPED:
		return ("mapped");
	}
	return ("invalid");
}
