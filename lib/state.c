/*
 * state.c - the per-page state machine.  Pure functions on one state byte:
 * the only code that decides whether a page may be written with zeros.
 * Built into both hpzerod and libhpz, which share the bytes (hpz-state.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hpz-state.h"
#include "uffd-compat.h"

/*
 * What to do for a fault.  A garbage page is always cleared (allocated
 * first if the file lacks it): the fault's kind says what the file held
 * when the fault was taken, and a MISSING fault read late may find the
 * page allocated since, by us ahead of it, with the old bytes a reset
 * declared garbage.  Any other MISSING fault is served by allocating (the
 * kernel zeroes new pages; a page that exists by then is left alone, it
 * holds data); any other MINOR fault maps the page as it is.
 */
enum page_action
state_fault_action(uint8_t state, enum fault_kind kind)
{
	if ((state & PAGE_STATE_MASK) == PAGE_GARBAGE)
		return (ACTION_CLEAR);
	if (kind == FAULT_MISSING)
		return (ACTION_POPULATE);
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

/*
 * A page this server owns is cleared and about to be mapped: say so before
 * the map, so that a server dying in between leaves it counted as data
 * (state_recover), never as garbage that a later clear would write over
 * what the client stored meanwhile.  A RESET bit that came is kept.
 */
void
state_mark_cleared(_Atomic uint8_t *page)
{
	uint8_t	old, new;

	old = atomic_load_explicit(page, memory_order_acquire);
	do {
		new = (uint8_t)((old & ~PAGE_STATE_MASK) | PAGE_ZEROED);
	} while (!atomic_compare_exchange_weak_explicit(page, &old, new,
	    memory_order_acq_rel, memory_order_acquire));
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

/* Must this page be cleared before the client may see it unserved? */
int
state_needs_clear(uint8_t state)
{
	return ((state & PAGE_STATE_MASK) == PAGE_GARBAGE);
}

/* One number of the host's huge pages of page_size, or -1. */
static long long
state_huge_count(uint64_t page_size, const char *what)
{
	char		 path[128];
	long long	 v = -1;
	FILE		*f;

	snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/"
	    "hugepages-%llukB/%s", (unsigned long long)(page_size >> 10),
	    what);
	if ((f = fopen(path, "re")) == NULL)
		return (-1);
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return (v);
}

/*
 * Has the host no free huge page of page_size that is not reserved (a
 * page_size of 4 KiB, shmem: no)?  Then a fault on a hole a punch left
 * cannot be given a page, and the kernel's own answer is SIGBUS.
 */
int
state_no_free_page(uint64_t page_size)
{
	long long	free, resv;

	if (page_size <= 4096)
		return (0);
	free = state_huge_count(page_size, "free_hugepages");
	resv = state_huge_count(page_size, "resv_hugepages");
	return (free >= 0 && resv >= 0 && free - resv < 1);
}

/*
 * Allocate pages [idx, idx+n) of a region's file (fd; page 0 at offset,
 * mapped shared at map): the kernel zeroes new ones, and existing ones
 * (data or not) stay as they are.  Faulting them in through the mapping
 * runs in parallel (a page lock each); fallocate, which holds the file's
 * lock, is the fallback for kernels without MADV_POPULATE_WRITE.  0, or a
 * negative errno (-EFAULT: past the end of the file, or no page could be
 * had: state_no_free_page tells which it may be).
 */
int
state_populate(void *map, int fd, uint64_t offset, uint64_t page_size,
    uint64_t idx, uint64_t n)
{
	int		error;

	if (madvise((char *)map + idx * page_size, n * page_size,
	    MADV_POPULATE_WRITE) == 0)
		return (0);
	error = errno;
	if (error != EINVAL)
		return (-error);
	if (fallocate(fd, 0, (off_t)(offset + idx * page_size),
	    (off_t)(n * page_size)) == -1)
		return (-errno);
	return (0);
}

/*
 * Zero the pages of [first, first+n) that the file has, through map (the
 * region's range, its page 0 at map, guarded by uffdio_hole_guard so that
 * a hole is refused, not allocated): MADV_POPULATE_WRITE maps what the
 * file holds and stops with EFAULT at a hole or past the end of the file,
 * and zero(arg, idx, k) writes zeros over each run of pages found there.
 * A hole reads zero already and stays one (*holes counts them, if not
 * NULL).  0, or a negative errno (zero's, or the kernel's).
 */
int
state_zero_present(void *map, uint64_t page_size, uint64_t first,
    uint64_t n, int (*zero)(void *arg, uint64_t idx, uint64_t k), void *arg,
    uint64_t *holes)
{
	char		*p = map;
	uint64_t	 i = first, j, end = first + n;
	int		 error;

	while (i < end) {
		if (madvise(p + i * page_size, (end - i) * page_size,
		    MADV_POPULATE_WRITE) == 0)
			return (zero(arg, i, end - i));
		if (errno != EFAULT)
			return (-errno);
		/* A hole somewhere: find it a page at a time. */
		for (j = i; j < end; j++) {
			if (madvise(p + j * page_size, page_size,
			    MADV_POPULATE_WRITE) == 0)
				continue;
			if (errno != EFAULT)
				return (-errno);
			break;
		}
		if (j > i && (error = zero(arg, i, j - i)) != 0)
			return (error);
		if (j < end && holes != NULL)
			(*holes)++;
		i = j + 1;
	}
	return (0);
}

/*
 * Clear the garbage pages of a region in place and mark them kept
 * (PAGE_KEEP: zeros now, the client's data from then on), in runs of at
 * most run pages: clear(arg, first, n) zeroes a run and returns 0, stops
 * the walk with -EINTR (out of time: what is left stays garbage), or
 * leaves that run garbage with any other error.  The pages stay in the
 * file, allocated as the client had them: a punch would free them, and on
 * hugetlbfs their reservation with them, for anyone to take.  Only the
 * holder of the server lock may call this.  Returns how many pages were
 * cleared; *left (if not NULL) says how many stay garbage.
 */
uint64_t
state_keep_garbage(_Atomic uint8_t *pages, uint64_t npages, uint64_t run,
    int (*clear)(void *arg, uint64_t first, uint64_t n), void *arg,
    uint64_t *left)
{
	uint64_t	i, start, n, cleared = 0, kept = 0;
	int		error, stop = 0;

	if (run == 0)
		run = 1;
	for (i = 0; i < npages; i = start + n) {
		start = i;
		n = 1;
		if (!state_needs_clear(atomic_load(&pages[i])))
			continue;
		while (start + n < npages && n < run &&
		    state_needs_clear(atomic_load(&pages[start + n])))
			n++;
		error = stop ? -EINTR : clear(arg, start, n);
		if (error == -EINTR)
			stop = 1;
		if (error != 0) {
			kept += n;
			continue;
		}
		for (i = start; i < start + n; i++)
			atomic_store(&pages[i], PAGE_KEEP);
		cleared += n;
	}
	if (left != NULL)
		*left = kept;
	return (cleared);
}

/*
 * Drop the garbage pages of a region from its file (fd; page 0 of the
 * region at offset), a run at a time, and mark them PAGE_KEEP: they are
 * holes from then on, and whatever the kernel puts there once the range is
 * no longer served is the client's.  On hugetlbfs a punch gives the
 * pages and their reservation back to the host: only for a region that
 * asks for holes (HPZ_RELEASE_HOLES), or as the last resort where
 * state_keep_garbage cannot run (no mapping of the file to be had).  A
 * run the file will not punch goes to clear(arg, first, n), which writes
 * zeros another way and returns 0; if it cannot (or clear is NULL) the run
 * stays garbage.  Only the holder of the server lock may call this.
 * Returns how many pages were dropped; *left (if not NULL) says how many
 * stay garbage.
 */
uint64_t
state_drop_garbage(_Atomic uint8_t *pages, uint64_t npages, int fd,
    uint64_t offset, uint64_t page_size,
    int (*clear)(void *arg, uint64_t first, uint64_t n), void *arg,
    uint64_t *left)
{
	uint64_t	i, start, n, dropped = 0, kept = 0;

	for (i = 0; i < npages; i = start + n) {
		start = i;
		n = 1;
		if (!state_needs_clear(atomic_load(&pages[i])))
			continue;
		while (start + n < npages &&
		    state_needs_clear(atomic_load(&pages[start + n])))
			n++;
		if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		    (off_t)(offset + start * page_size),
		    (off_t)(n * page_size)) == -1 &&
		    (clear == NULL || clear(arg, start, n) != 0)) {
			kept += n;
			continue;
		}
		for (i = start; i < start + n; i++)
			atomic_store(&pages[i], PAGE_KEEP);
		dropped += n;
	}
	if (left != NULL)
		*left = kept;
	return (dropped);
}

/*
 * What a page left BUSY by a dead server holds.  BUSY|GARBAGE: it was being
 * cleared or allocated and never mapped (the map comes only after
 * state_mark_cleared), so it is still garbage.  BUSY|ZEROED: cleared and
 * perhaps mapped; the client may have written it: data.  BUSY with a
 * reset pending: garbage, as the reset said.  Anything else kept its state.
 */
uint8_t
state_recovered(uint8_t state)
{
	if ((state & PAGE_BUSY) == 0)
		return (state);
	if (state & PAGE_RESET)
		return (PAGE_GARBAGE);
	switch (state & PAGE_STATE_MASK) {
	case PAGE_GARBAGE:
		return (PAGE_GARBAGE);
	case PAGE_ZEROED:
		return (PAGE_MAPPED);
	default:
		return (state & PAGE_STATE_MASK);
	}
}

/*
 * Resolve the BUSY bits a dead server left (only a new holder of the
 * server lock may call this).  Returns how many pages it changed.
 */
uint64_t
state_recover(_Atomic uint8_t *pages, uint64_t n)
{
	uint64_t	i, changed = 0;
	uint8_t		old;

	for (i = 0; i < n; i++) {
		old = atomic_load_explicit(&pages[i], memory_order_acquire);
		if ((old & PAGE_BUSY) == 0)
			continue;
		atomic_store_explicit(&pages[i], state_recovered(old),
		    memory_order_release);
		changed++;
	}
	return (changed);
}

/*
 * Take the server lock of a state memfd: a write lock on its byte 0 held
 * through a new open file description, so only closing the returned fd (or
 * dying) drops it.  Waits up to wait_ms.  The lock fd, or a negative errno
 * (-EAGAIN: someone alive holds it).
 */
int
state_lock_server(int memfd, int wait_ms)
{
	struct flock	 fl;
	struct timespec	 ts = { 0, 10 * 1000 * 1000 };
	char		 path[64];
	int		 fd, waited = 0, error;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	if ((fd = open(path, O_RDWR | O_CLOEXEC)) == -1)
		return (-errno);
	for (;;) {
		fl.l_type = F_WRLCK;
		fl.l_whence = SEEK_SET;
		fl.l_start = 0;
		fl.l_len = 1;
		fl.l_pid = 0;
		if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
			return (fd);
		error = errno;
		if ((error != EAGAIN && error != EACCES) || waited >= wait_ms)
			break;
		nanosleep(&ts, NULL);
		waited += 10;
	}
	close(fd);
	return (error == EACCES ? -EAGAIN : -error);
}

const char *
state_name(uint8_t state)
{
	static const char *const names[] = {
		[PAGE_KEEP] = "keep",
		[PAGE_GARBAGE] = "garbage",
		[PAGE_ZEROED] = "zeroed",
		[PAGE_MAPPED] = "mapped",
	};
	unsigned int	 s = state & PAGE_STATE_MASK;

	if (s >= sizeof(names) / sizeof(names[0]) || names[s] == NULL)
		return ("invalid");
	return (names[s]);
}
