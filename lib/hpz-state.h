/*
 * hpz-state.h - the per-page state of a region, shared by hpzerod and
 * libhpz through a memfd the client creates and passes on register.
 *
 * The state outlives the daemon: the client keeps the memfd (and systemd's
 * fd store may keep a copy), so a daemon that crashes and comes back, or
 * libhpz serving its own faults meanwhile, knows which pages are garbage.
 *
 * Layout: struct hpz_state_header at offset 0, then one byte a page from
 * HPZ_STATE_PAGES_OFF.  The memfd is sealed against shrinking and growing,
 * so no mapping of it can fault with SIGBUS.
 *
 * Who may set PAGE_BUSY: only the holder of the server lock (an OFD write
 * lock on byte 0 of the memfd, taken through an open file description of
 * its own, so it dies with the process).  Whoever takes the lock may
 * therefore treat every BUSY bit it finds as left by a dead server and
 * resolve it with state_recover(); see there for why that is safe.
 */
#ifndef HPZ_STATE_H
#define HPZ_STATE_H

#include <stdatomic.h>
#include <stdint.h>

#define HPZ_STATE_MAGIC		0x54535a48u	/* "HZST" */
#define HPZ_STATE_VERSION	1
#define HPZ_STATE_PAGES_OFF	4096

/*
 * Per-page state.  The low bits say what the page holds; nothing but
 * state_fault_action() decides to write zeros, and only for PAGE_GARBAGE.
 */
enum page_state {
	PAGE_KEEP = 0,		/* never seen: whatever the file holds is data */
	PAGE_GARBAGE = 1,	/* declared garbage: clear before mapping */
	PAGE_ZEROED = 2,	/* cleared, not known to be mapped; while BUSY:
				   cleared and about to be mapped */
	PAGE_MAPPED = 3,	/* mapped into the client: client data */
};
#define PAGE_STATE_MASK		0x0f
#define PAGE_RESET		0x40	/* reset while busy: garbage when done */
#define PAGE_BUSY		0x80	/* a server thread owns the page */

enum fault_kind {
	FAULT_MISSING,		/* no page in the file */
	FAULT_MINOR,		/* page in the file, not mapped */
};

enum page_action {
	ACTION_POPULATE,	/* allocate (kernel zeroes it), then map */
	ACTION_CLEAR,		/* write zeros, then map */
	ACTION_MAP,		/* map as it is */
};

/* What the daemon writes when it first takes a state memfd; checked after. */
struct hpz_state_header {
	uint32_t	magic;		/* HPZ_STATE_MAGIC once initialised */
	uint32_t	version;	/* HPZ_STATE_VERSION */
	uint64_t	page_size;
	uint64_t	npages;
	uint64_t	addr;		/* the range, as first registered */
	uint64_t	len;
	uint64_t	offset;
	uint64_t	generation;	/* bumped by every server taking it */
	uint64_t	uffd_features;	/* as registered */
	uint64_t	uffd_ioctls;
	uint32_t	flags;		/* HPZ_REGION_FLAGS */
	int32_t		server_pid;	/* last server, for people reading it */
};

/* Bytes a state memfd needs for npages pages. */
#define HPZ_STATE_SIZE(npages)	((uint64_t)HPZ_STATE_PAGES_OFF + (npages))

/* lib/state.c: pure functions on state bytes, and the server lock. */
enum page_action state_fault_action(uint8_t state, enum fault_kind kind);
int		 state_claim(_Atomic uint8_t *page, uint8_t *was);
uint8_t		 state_release(_Atomic uint8_t *page, uint8_t newstate);
void		 state_mark_cleared(_Atomic uint8_t *page);
void		 state_reset(_Atomic uint8_t *page);
int		 state_needs_clear(uint8_t state);
int		 state_no_free_page(uint64_t page_size);
int		 state_populate(void *map, int fd, uint64_t offset,
		    uint64_t page_size, uint64_t idx, uint64_t n);
int		 state_zero_present(void *map, uint64_t page_size,
		    uint64_t first, uint64_t n,
		    int (*zero)(void *arg, uint64_t idx, uint64_t k),
		    void *arg, uint64_t *holes);
uint64_t	 state_keep_garbage(_Atomic uint8_t *pages, uint64_t npages,
		    uint64_t run,
		    int (*clear)(void *arg, uint64_t first, uint64_t n),
		    void *arg, uint64_t *left);
uint64_t	 state_drop_garbage(_Atomic uint8_t *pages, uint64_t npages,
		    int fd, uint64_t offset, uint64_t page_size,
		    int (*clear)(void *arg, uint64_t first, uint64_t n),
		    void *arg, uint64_t *left);
uint8_t		 state_recovered(uint8_t state);
uint64_t	 state_recover(_Atomic uint8_t *pages, uint64_t n);
const char	*state_name(uint8_t state);
int		 state_lock_server(int memfd, int wait_ms);
#endif /* HPZ_STATE_H */
