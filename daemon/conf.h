/*
 * conf.h - the settings, from one table (conf.c, conf-file.c).
 */
#ifndef HPZD_CONF_H
#define HPZD_CONF_H

#include <stddef.h>
#include <stdint.h>

#include "topo.h"

#define POOL_NSIZES	2	/* 2 MiB, 1 GiB: struct conf's arrays */

/* The words of the settings that choose (conf.c's words tables). */
enum worker_route_mode {
	ROUTE_READER,		/* the CPU the fault was read on */
	ROUTE_THREAD,		/* the faulting thread's last CPU (THREAD_ID) */
	ROUTE_HASH,		/* by page, ignoring CPUs */
};

enum { INTERCEPT_AUTO, INTERCEPT_ALWAYS };	/* [policy] intercept */
enum { ASIDE_AUTO, ASIDE_NEVER, ASIDE_ALWAYS };	/* [policy] step_aside */

/* What the workers run with (conf_worker makes it, worker.c uses it). */
struct worker_config {
	int			 nworkers;
	int			 spin_us;	/* most a worker spins for work */
	enum worker_route_mode	 route;
	uint64_t		 hot_size;	/* neighbourhood cleared last */
	uint64_t		 extent_max;	/* 0: from the LLC share */
	int			 split;		/* share a page with spinning
						   workers */
};

/*
 * conf.c: the settings, from one table: the command line's values, the
 * defaults and the log; conf-file.c: hpzerod.conf (INI, read with libinih).
 */
struct conf {
	char		 socket[108];		/* [daemon] socket */
	int		 workers;		/* [daemon] workers, 0: CPUs */
	char		 clear_kernel[16];	/* [clear] kernel, "": auto */
	char		 hot_kernel[16];	/* [clear] hot_kernel */
	uint64_t	 hot_size;		/* [clear] hot_size */
	uint64_t	 extent;		/* [clear] extent, 0: LLC share */
	int		 spin_us;		/* [workers] spin_us */
	int		 route;			/* [workers] route */
	int		 split;			/* [workers] split */
	/* [background]: re-read on SIGHUP. */
	int		 scrub;			/* scrub = yes|no */
	int		 scrub_threads;		/* threads, 0: one per CPU */
	double		 background_gbs;	/* gbs, 0: unlimited */
	double		 client_gbs;		/* client_gbs, 0: unlimited */
	uint64_t	 ahead_min;		/* ahead_min */
	uint64_t	 ahead_max;		/* ahead_max */
	/* [limits], per uid; 0: unlimited.  Re-read on SIGHUP. */
	int		 uid_clients;		/* clients */
	int		 uid_regions;		/* regions */
	uint64_t	 uid_bytes;		/* bytes (0: derived) */
	uint64_t	 uid_state_bytes;	/* state_bytes */
	uint64_t	 region_pages;		/* region_pages, a region */
	int		 uid_stuck_contexts;	/* stuck_contexts */
	int		 uid_contexts;		/* contexts */
	int		 ctx_threads;		/* threads (0: derived) */
	uint64_t	 map_bytes;		/* map_bytes, all uids
						   (0: derived) */
	int		 region_forks;		/* forks, a region */
	/* [pool]: re-read on SIGHUP. */
	int		 pool;			/* enable */
	uint64_t	 pool_size[POOL_NSIZES][TOPO_NODES_MAX]; /* size_2m,
						   size_1g: bytes a node */
	uint64_t	 pool_reserve[POOL_NSIZES];	/* reserve_2m, _1g */
	double		 pool_gbs;		/* gbs, 0: unlimited */
	uint64_t	 pool_uid_bytes;	/* uid_bytes a minute, 0: uid_share */
	int		 pool_uid_share;	/* % of the host's pages, 0: none */
	int		 pool_quiet_ms;		/* after a guest's take, 0: none */
	int		 pool_short_hold_ms;	/* a short hand-out's rest */
	/* [policy]: re-read on SIGHUP. */
	int		 intercept;		/* intercept = auto|always */
	int		 step_aside;		/* step_aside = auto|never|always */
};
/*
 * One key of the settings: its place in hpzerod.conf, its option, its type,
 * range and default, and its field in struct conf.  conf.c's table of them
 * drives the file, the command line, the range checks and the log.
 */
enum conf_type {
	CONF_PATH,		/* char[], 1 .. size-1 bytes */
	CONF_INT,		/* int, min .. max */
	CONF_BYTES,		/* uint64_t, a size from min to max */
	CONF_PAGES,		/* uint64_t, a count of pages, K/M/G allowed */
	CONF_EXTENT,		/* uint64_t, "auto" (0) or min .. max */
	CONF_BOOL,		/* int, 0 or 1 */
	CONF_GBS,		/* double, min .. max GB/s */
	CONF_KERNEL,		/* char[], a clear kernel or "auto" ("") */
	CONF_HOT_KERNEL,	/* char[], an ordinary-store kernel or "auto" */
	CONF_WORD,		/* int, the index of one of words */
	CONF_POOL_SIZE,		/* uint64_t[TOPO_NODES_MAX]: "SIZE" for every
				   node, or "NODE:SIZE,..."; whole pages of
				   min bytes */
};
#define CONF_RELOAD	0x1	/* SIGHUP applies it while running */
#define CONF_UNLIMITED	0x2	/* 0 is no limit */
#define CONF_OPT_NOZERO	0x4	/* the option refuses 0 */
struct conf_key {
	const char	*section;
	const char	*name;		/* in hpzerod.conf */
	const char	*option;	/* --option, NULL: the file only */
	int		 letter;	/* -x for it too, 0: none */
	enum conf_type	 type;
	size_t		 off;		/* of the field in struct conf */
	size_t		 size;		/* of the field */
	uint64_t	 min;
	uint64_t	 max;
	const char *const *words;	/* CONF_WORD: value i is words[i] */
	const char	*def;		/* the default, as the file writes it */
	const char	*arg;		/* the option's argument, for --help */
	const char	*help;		/* what it does, for --help */
	int		 flags;		/* CONF_RELOAD, ... */
};
const struct conf_key *conf_key_at(size_t);
const struct conf_key *conf_key_find(const char *section, const char *name);
void		 conf_defaults(struct conf *);
int		 conf_set(struct conf *, const struct conf_key *,
		    const char *value, int option, char *why, size_t whylen);
void		 conf_format(const struct conf *, const struct conf_key *,
		    char *buf, size_t len);
void		 conf_expect(const struct conf_key *, int option, char *buf,
		    size_t len);
int		 conf_same(const struct conf *, const struct conf *,
		    const struct conf_key *);
int		 conf_restart_diff(const struct conf *, const struct conf *,
		    char *names, size_t len);
void		 conf_reload(struct conf *, const struct conf *);
void		 conf_worker(const struct conf *, int nworkers,
		    struct worker_config *);
const char	*conf_text(const struct conf *, const char *section,
		    int reload_only, char *buf, size_t len);
int		 conf_load(const char *path, struct conf *, char *why,
		    size_t whylen);
int		 conf_parse_bytes(const char *, uint64_t *);

#endif /* HPZD_CONF_H */
