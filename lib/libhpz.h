/*
 * libhpz.h - private declarations shared by the files of libhpz.
 */
#ifndef LIBHPZ_H
#define LIBHPZ_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "hpz.h"
#include "hpz-protocol.h"

/*
 * The kernel's base page: what /proc/self/pagemap counts in, what a fault
 * outside every region is woken by, and the largest page shmem has (a
 * bigger page is hugetlbfs).
 */
#define LIB_BASE_PAGE		4096ULL

/*
 * A region this process registered.  The list is changed only with both
 * lib_lock and lib_rlock held, so either lock is enough to walk it.  The
 * guard thread, serving while the daemon is away, changes addr (a remap of
 * the whole region), serving, lockfd, map and gone under lib_rlock alone.
 */
struct lib_region {
	struct lib_region	*next;
	uintptr_t		 addr;
	size_t			 len;
	uint64_t		 offset;
	uint64_t		 page_size;
	uint64_t		 npages;
	uint64_t		 features;	/* UFFDIO_API agreed to these */
	uint64_t		 ioctls;	/* UFFDIO_REGISTER offered these */
	uint32_t		 flags;		/* HPZ_REGION_FLAGS */
	uint64_t		 id;		/* the daemon's, from its reply */
	int			 uffd;
	int			 sfd;		/* page-state memfd (hpz-state.h) */
	int			 fd;		/* our copy of the backing file */
	void			*smap;		/* the state memfd, mapped */
	_Atomic uint8_t		*state;		/* its page bytes */

	/* While libhpz serves the region itself (serve.c). */
	int			 serving;
	int			 trapping;	/* registered for faults (else
						   the kernel serves them) */
	int			 lockfd;	/* server lock, or -1 */
	void			*map;		/* the backing range, or NULL */
	int			 gone;		/* unmapped: serve no more */
};

/* Where libhpz stands with hpzerod (guard.c, under lib_rlock). */
enum lib_mode {
	LIB_CONNECTED,		/* the daemon serves our regions (or none) */
	LIB_LOST,		/* connection gone, nobody serves yet */
	LIB_RESTORING,		/* registering our regions again */
	LIB_FALLBACK,		/* libhpz serves its own faults */
};

/* conn.c */
extern pthread_mutex_t	 lib_lock;
int		 lib_fail(int error, const char *fmt, ...)
		    __attribute__((format(printf, 2, 3)));
void		 lib_conn_fork_child(void);
void		 lib_conn_watch(void (*up)(int), void (*down)(void));
int		 lib_conn_refused(void);
int		 lib_dial(void);
int		 lib_connect(void);
void		 lib_disconnect(void);
int		 lib_exchange(int sock, void *req, size_t len, const int *fds,
		    int nfds, struct hpz_msg *reply, uint16_t want,
		    int timeout_ms);
int		 lib_call(void *req, size_t len, const int *fds, int nfds,
		    struct hpz_msg *reply, uint16_t want);

/* registry.c */
extern struct lib_region *lib_regions;
extern pthread_mutex_t	 lib_rlock;
void		 lib_region_free(struct lib_region *lr);
void		 lib_registry_fork_child(void);
void		 lib_follow(struct lib_region *lr);
struct lib_region *lib_find_id(uint64_t id);
struct lib_region *lib_lookup(uintptr_t addr, size_t len);
struct lib_region *lib_lookup_within(uintptr_t addr, size_t len);
int		 lib_overlaps(uintptr_t addr, size_t len);
int		 lib_is_registered(const struct hpz_region *region);

/* guard.c */
void		 lib_guard_start(void);
void		 lib_guard_fork_child(void);
void		 lib_guard_connected(int sock);
void		 lib_guard_disconnected(void);
enum lib_mode	 lib_guard_mode(void);
int		 lib_guard_serving(struct lib_region *lr);
int		 lib_guard_ready(void);
int		 lib_guard_wait(uint64_t deadline_ms);
uint64_t	 lib_guard_deadline(void);
int		 lib_guard_reset(struct lib_region *lr, uintptr_t addr,
		    size_t len);
int		 lib_guard_abandon(struct lib_region *lr);
void		 lib_guard_unlink(struct lib_region *lr);
void		 lib_forget(const struct hpz_region *region);

/* serve.c */
extern struct uffd_msg	*lib_q;
extern size_t		 lib_qn, lib_qcap;
void		 lib_warn(const char *fmt, ...)
		    __attribute__((format(printf, 1, 2)));
int		 lib_serve_start(struct lib_region *lr);
void		 lib_serve_stop(struct lib_region *lr);
void		 lib_serve_uffd(struct lib_region *lr);
void		 lib_keep_garbage(struct lib_region *lr);

#endif /* LIBHPZ_H */
