/*
 * region-life.h - a region's life on the main thread: probe, attach,
 * start, move, reset, destroy, and the tending pass (region.c).
 */
#ifndef HPZD_REGION_LIFE_H
#define HPZD_REGION_LIFE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hpz-protocol.h"
#include "region.h"

struct cctx;

extern struct regions	 region_all;
int		 region_create(struct client *, const struct hpz_msg_register *,
		    int uffd, int fd, int sfd, struct region **, char *why,
		    size_t whylen);
int		 region_start(struct region *);
struct region	*region_find_state_id(dev_t, ino_t);
void		 region_set_id(struct region *, uint64_t id);
void		 region_reserve_ids(uint64_t max);
void		 region_move(struct region *, struct client *);
void		 region_destroy(struct region *);
void		 region_destroy_then(struct region *, void (*)(void *),
		    void *);
int		 region_probe(pid_t, const struct hpz_msg_register *, int,
		    int, int, struct region **, char *, size_t);
int		 region_attach(struct client *, struct region *, char *,
		    size_t);
void		 region_free_probed(struct region *);
void		 region_discard(struct cctx *, struct region *);
struct region	*region_find(struct client *, uint64_t addr, uint64_t len,
		    int exact);
int		 region_reset(struct region *, uint64_t addr, uint64_t len,
		    void (*done)(void *, int), void *arg);
void		 region_reset_work(struct region *);
void		 region_tend_init(void);
void		 region_on_release(void (*)(struct client *));
void		 region_resolve_init(struct region *);
void		 region_set_policy(struct region *, uint32_t flags, int prio);

#endif /* HPZD_REGION_LIFE_H */
