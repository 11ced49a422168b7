/*
 * registry.c - the regions this process registered (struct lib_region, on
 * lib_regions, under lib_rlock): finding one by range or by the daemon's
 * id, following one the daemon saw move (mremap), and freeing the records
 * a forked child inherited.  Under guard.c, which serves them.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>

#include "libhpz.h"
#include "hpz-state.h"

/* Changed with lib_lock and lib_rlock held (libhpz.h). */
struct lib_region	*lib_regions;
/* The list's lock, which guard.c also takes for its mode (libhpz.h). */
pthread_mutex_t		 lib_rlock = PTHREAD_MUTEX_INITIALIZER;

static void		 lib_follow_all(void);
static struct lib_region *lib_find(uintptr_t, size_t, struct lib_region ***);
static struct lib_region *lib_find_within(uintptr_t, size_t);

void
lib_region_free(struct lib_region *lr)
{
	if (lr->smap != NULL)
		munmap(lr->smap, HPZ_STATE_SIZE(lr->npages));
	if (lr->uffd >= 0)
		close(lr->uffd);
	if (lr->sfd >= 0)
		close(lr->sfd);
	if (lr->fd >= 0)
		close(lr->fd);
	free(lr);
}

/* A forked child has no regions: its copies of the records and fds go. */
void
lib_registry_fork_child(void)
{
	struct lib_region	*lr, *next;

	for (lr = lib_regions; lr != NULL; lr = next) {
		next = lr->next;
		/* MADV_DONTFORK kept the ranges (and our maps) out of it. */
		lr->smap = NULL;
		lib_region_free(lr);
	}
	lib_regions = NULL;
}

/*
 * A region may have moved: an mremap of the whole range.  The daemon (or
 * our guard, while it serves) follows the move as it reads the uffd's
 * remap event and writes the new address into the state header; take it
 * from there (lib_lock held).  Taking lib_rlock also waits for a guard
 * that is handling such an event right now.
 */
void
lib_follow(struct lib_region *lr)
{
	const struct hpz_state_header	*h = lr->smap;
	uint64_t			 a, len;

	if (h == NULL || __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) !=
	    HPZ_STATE_MAGIC)
		return;
	a = __atomic_load_n(&h->addr, __ATOMIC_ACQUIRE);
	len = __atomic_load_n(&h->len, __ATOMIC_RELAXED);
	if (a == lr->addr || a == 0 || len != lr->len ||
	    a % lr->page_size != 0 || a + len < a)
		return;
	pthread_mutex_lock(&lib_rlock);
	lr->addr = (uintptr_t)a;
	pthread_mutex_unlock(&lib_rlock);
}

static void
lib_follow_all(void)
{
	struct lib_region	*lr;

	pthread_mutex_lock(&lib_rlock);
	pthread_mutex_unlock(&lib_rlock);
	for (lr = lib_regions; lr != NULL; lr = lr->next)
		lib_follow(lr);
}

/* The record of the daemon's region id (from its reply), or NULL. */
struct lib_region *
lib_find_id(uint64_t id)
{
	struct lib_region	*lr;

	if (id == 0)
		return (NULL);
	for (lr = lib_regions; lr != NULL; lr = lr->next)
		if (lr->id == id)
			return (lr);
	return (NULL);
}

/* The registered-region record for exactly this range, or NULL. */
static struct lib_region *
lib_find(uintptr_t addr, size_t len, struct lib_region ***prevp)
{
	struct lib_region	**pp, *lr;

	for (pp = &lib_regions; (lr = *pp) != NULL; pp = &lr->next) {
		if (lr->addr == addr && lr->len == len) {
			if (prevp != NULL)
				*prevp = pp;
			return (lr);
		}
	}
	return (NULL);
}

/* The record whose range holds [addr, addr+len), or NULL. */
static struct lib_region *
lib_find_within(uintptr_t addr, size_t len)
{
	struct lib_region	*lr;

	for (lr = lib_regions; lr != NULL; lr = lr->next)
		if (addr >= lr->addr && len <= lr->len &&
		    addr - lr->addr <= lr->len - len)
			return (lr);
	return (NULL);
}

/*
 * lib_find and lib_find_within, following moves (lib_follow_all) only on
 * a miss: reading every header costs a cache miss each, for 1000 regions
 * as much as the request.
 */
struct lib_region *
lib_lookup(uintptr_t addr, size_t len)
{
	struct lib_region	*lr;

	if ((lr = lib_find(addr, len, NULL)) == NULL) {
		lib_follow_all();
		lr = lib_find(addr, len, NULL);
	}
	return (lr);
}

struct lib_region *
lib_lookup_within(uintptr_t addr, size_t len)
{
	struct lib_region	*lr;

	if ((lr = lib_find_within(addr, len)) == NULL) {
		lib_follow_all();
		lr = lib_find_within(addr, len);
	}
	return (lr);
}

/* Does [addr, addr+len) overlap a region we know (where it lies now)? */
int
lib_overlaps(uintptr_t addr, size_t len)
{
	if (lib_find_within(addr, 1) == NULL &&
	    lib_find_within(addr + len - 1, 1) == NULL)
		return (0);
	lib_follow_all();
	return (lib_find_within(addr, 1) != NULL ||
	    lib_find_within(addr + len - 1, 1) != NULL);
}

int
lib_is_registered(const struct hpz_region *region)
{
	int	found;

	pthread_mutex_lock(&lib_lock);
	found = lib_lookup((uintptr_t)region->addr, region->len) != NULL;
	pthread_mutex_unlock(&lib_lock);
	return (found);
}
