/*
 * preload.h - what the files of libhpz-preload.so share, from the bottom
 * up: preload-base.c (the settings, the next definitions in line, the
 * table of mappings), preload-pool.c (a pool file for the program's
 * hugetlb memfd, kept looking like the program's own: punches, sizes, its
 * own userfaultfd), preload-uffd.c (the hand-over to the program's own
 * userfaultfd) and preload.c (the interposers of the mappings).  A file
 * calls only the ones before it (tests/lint.sh checks it).
 *
 * All of it is hidden: the library exports only the functions it
 * interposes (and the program's own symbols of these names stay its own).
 */
#ifndef PRELOAD_H
#define PRELOAD_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "hpz.h"

#pragma GCC visibility push(hidden)

#define PRELOAD_SLOTS		256	/* registered mappings at once */

/* A slot of the mapping table. */
#define PRELOAD_FREE		0
#define PRELOAD_PENDING		1	/* a call to hpzerod in flight */
#define PRELOAD_REGISTERED	2
#define PRELOAD_HANDED		3	/* the program's own uffd has it */

struct preload_map {
	int		 state;
	uintptr_t	 addr;
	size_t		 len;
	size_t		 page;
	int		 fd;		/* our copy of the file, or -1 */
	off64_t		 off;
	unsigned int	 flags;		/* as registered */
	dev_t		 dev;		/* the file, for SCM_RIGHTS */
	ino_t		 ino;
	int		 uffd;		/* HANDED: the program's uffd, or -1 */
};

/* The definitions ours hide that more than one file calls. */
extern void	*(*real_mremap)(void *, size_t, size_t, int, ...);
extern ssize_t	(*real_sendmsg)(int, const struct msghdr *, int);
extern int	(*real_register)(const struct hpz_region *);
extern int	(*real_memfd_create)(const char *, unsigned int);
extern int	(*real_ftruncate)(int, off_t);
extern int	(*real_ftruncate64)(int, off64_t);
extern int	(*real_fallocate)(int, int, off_t, off_t);
extern int	(*real_fallocate64)(int, int, off64_t, off64_t);

/* preload_lock guards the table and every slot's state. */
extern pthread_mutex_t	 preload_lock;
extern struct preload_map preload_maps[PRELOAD_SLOTS];
extern int		 preload_used;		/* slots not free */
extern int		 preload_handed;	/* slots handed over */
extern int		 preload_discards;	/* registered discard */
extern size_t		 preload_min;		/* HPZ_RUN_MIN */
extern unsigned int	 preload_flags;		/* HPZ_RUN_FLAGS */
extern int		 preload_verbose;
extern int		 preload_off;		/* given up for this process */
extern int		 preload_nopool;	/* -f nopool */
/* Bumped by every munmap and fixed mmap: a populate ahead stops. */
extern unsigned long	 preload_map_gen;
/* Set while this thread is inside a wrapper: calls made meanwhile pass. */
extern __thread int	 preload_busy __attribute__((tls_model("initial-exec")));

/* What preload_wants selects (HPZ_RUN_SELECT and the like). */
struct runselect;
extern struct runselect	 preload_select;

/* preload-base.c */
void		 preload_say(const char *, ...)
		    __attribute__((format(printf, 1, 2)));
const char	*preload_size_text(size_t, char *, size_t);
void		 preload_resolve_once(void);
void		*preload_real_mmap(void *, size_t, int, int, int, off64_t, int);
int		 preload_real_munmap(void *, size_t);
int		 preload_real_ioctl(int, unsigned long, void *);
int		 preload_real_close(int);
int		 preload_ready(void);
int		 preload_from_libhpz(const void *);
void		 preload_slot_free(struct preload_map *);
void		 preload_slot_region(const struct preload_map *,
		    struct hpz_region *);

/* preload-pool.c */
extern int	 preload_pool_mapped;	/* pool file mappings noted */
void		 preload_pool_forget(int);
int		 preload_pool_map(void *, size_t, int, off64_t);
void		 preload_pool_unmap(const void *, size_t);
int		 preload_pool_unfill(uintptr_t, uintptr_t);

#pragma GCC visibility pop

#endif /* PRELOAD_H */
