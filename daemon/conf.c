/*
 * conf.c - the settings: one table of keys that hpzerod.conf (conf-file.c),
 * the command line, the defaults, the range checks and their messages and
 * the log all come from.  Pure: no logging, no globals; the caller reports
 * the error and applies what was read.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hpz.h"
#include "size.h"

#include "clear.h"
#include "conf.h"
#include "globals.h"
#include "plan.h"
#include "topo.h"

#define CONF_GBS_MAX		1e6	/* GB/s: 1 PB/s is a typo */
#define CONF_PAGE_2M		(2ULL << 20)
#define CONF_PAGE_1G		(1ULL << 30)

static const char *const conf_routes[] = {
	[ROUTE_READER] = "reader",
	[ROUTE_THREAD] = "thread",
	[ROUTE_HASH] = "hash",
	NULL
};
static const char *const conf_intercepts[] = {
	[INTERCEPT_AUTO] = "auto",
	[INTERCEPT_ALWAYS] = "always",
	NULL
};
static const char *const conf_asides[] = {
	[ASIDE_AUTO] = "auto",
	[ASIDE_NEVER] = "never",
	[ASIDE_ALWAYS] = "always",
	NULL
};

#define CONF_FIELD(f)	offsetof(struct conf, f), \
			sizeof(((struct conf *)NULL)->f)
#define CONF_STRMAX(f)	(sizeof(((struct conf *)NULL)->f) - 1)

/*
 * Every setting, once: section, key, option (and short letter), type,
 * field, range, words, default as the file writes it, --help's argument
 * and line, flags.  The defaults are documented in hpzerod.conf(5) and
 * hpzerod(8).  A region costs its state bytes (one a page) in every walk
 * of its state, whatever its pages cost the client: 16M pages is 64 GiB
 * of 4 KiB shmem, 32 TiB of 2 MiB pages; 64M of state a uid, four such
 * regions.  A sparse 1 TiB region of 4 KiB pages (256M pages) is refused.
 */
static const struct conf_key conf_keys[] = {
	{ "daemon", "socket", "socket", 's', CONF_PATH, CONF_FIELD(socket),
	    1, CONF_STRMAX(socket), NULL, HPZ_SOCKET_DEFAULT, "PATH",
	    "listen on PATH, unless systemd passes a socket", 0 },
	{ "daemon", "workers", "workers", 'w', CONF_INT, CONF_FIELD(workers),
	    0, HPZD_WORKERS_MAX, NULL, "0", "N",
	    "worker threads (0, in the file: one a CPU)",
	    CONF_OPT_NOZERO },
	{ "clear", "kernel", "clear-kernel", 'k', CONF_KERNEL,
	    CONF_FIELD(clear_kernel), 0, 0, NULL, "auto", "K",
	    "bulk clear kernel (auto: the fastest at start)", 0 },
	{ "clear", "hot_kernel", "hot-kernel", 'K', CONF_HOT_KERNEL,
	    CONF_FIELD(hot_kernel), 0, 0, NULL, "auto", "K",
	    "kernel for the faulting neighbourhood", 0 },
	{ "clear", "hot_size", "hot-size", 'H', CONF_BYTES,
	    CONF_FIELD(hot_size), 0, 1ULL << 30, NULL, "64K", "BYTES",
	    "neighbourhood of the faulting 4 KiB, cleared last", 0 },
	{ "clear", "extent", "extent", 'e', CONF_EXTENT, CONF_FIELD(extent),
	    PLAN_EXTENT_MIN, PLAN_EXTENT_MAX, NULL, "auto", "BYTES",
	    "largest clear extent (auto: a CPU's LLC share)", 0 },
	{ "workers", "spin_us", "spin-us", 'p', CONF_INT, CONF_FIELD(spin_us),
	    0, 100000, NULL, "50", "N",
	    "most microseconds an idle worker spins", 0 },
	{ "workers", "route", "route", 'r', CONF_WORD, CONF_FIELD(route), 0, 0,
	    conf_routes, "reader", "MODE", "which worker takes a fault", 0 },
	{ "workers", "split", "split", 'S', CONF_BOOL, CONF_FIELD(split), 0, 1,
	    NULL, "yes", "on|off",
	    "share a page's clear with workers already spinning", 0 },
	{ "background", "scrub", "scrub", 'U', CONF_BOOL, CONF_FIELD(scrub),
	    0, 1, NULL, "yes", "on|off", "clear garbage in the background",
	    CONF_RELOAD },
	{ "background", "threads", NULL, 0, CONF_INT,
	    CONF_FIELD(scrub_threads), 0, HPZD_WORKERS_MAX, NULL, "0", NULL,
	    NULL, 0 },
	{ "background", "gbs", "background-gbs", 'B', CONF_GBS,
	    CONF_FIELD(background_gbs), 0, CONF_GBS_MAX, NULL, "0", "G",
	    "background budget in all", CONF_RELOAD | CONF_UNLIMITED },
	{ "background", "client_gbs", "client-gbs", 'C', CONF_GBS,
	    CONF_FIELD(client_gbs), 0, CONF_GBS_MAX, NULL, "0", "G",
	    "background budget a client", CONF_RELOAD | CONF_UNLIMITED },
	{ "background", "ahead_min", NULL, 0, CONF_BYTES,
	    CONF_FIELD(ahead_min), 0, UINT64_MAX, NULL, "4M", NULL, NULL,
	    CONF_RELOAD },
	{ "background", "ahead_max", NULL, 0, CONF_BYTES,
	    CONF_FIELD(ahead_max), 0, UINT64_MAX, NULL, "256M", NULL, NULL,
	    CONF_RELOAD },
	{ "limits", "clients", NULL, 0, CONF_INT, CONF_FIELD(uid_clients), 0,
	    HPZD_CLIENTS_MAX, NULL, "64", NULL, NULL,
	    CONF_RELOAD | CONF_UNLIMITED },
	{ "limits", "regions", NULL, 0, CONF_INT, CONF_FIELD(uid_regions), 0,
	    1000000, NULL, "4096", NULL, NULL, CONF_RELOAD | CONF_UNLIMITED },
	{ "limits", "bytes", NULL, 0, CONF_BYTES, CONF_FIELD(uid_bytes), 0,
	    UINT64_MAX, NULL, "0", NULL, NULL, CONF_RELOAD },
	{ "limits", "state_bytes", NULL, 0, CONF_BYTES,
	    CONF_FIELD(uid_state_bytes), 0, UINT64_MAX, NULL, "64M", NULL,
	    NULL, CONF_RELOAD | CONF_UNLIMITED },
	{ "limits", "region_pages", NULL, 0, CONF_PAGES,
	    CONF_FIELD(region_pages), 0, UINT64_MAX, NULL, "16M", NULL, NULL,
	    CONF_RELOAD | CONF_UNLIMITED },
	{ "limits", "stuck_contexts", NULL, 0, CONF_INT,
	    CONF_FIELD(uid_stuck_contexts), 0, 1024, NULL, "4", NULL, NULL,
	    CONF_RELOAD | CONF_UNLIMITED },
	{ "limits", "contexts", NULL, 0, CONF_INT,
	    CONF_FIELD(uid_contexts), 0, 4096, NULL, "32", NULL, NULL,
	    CONF_RELOAD | CONF_UNLIMITED },
	{ "limits", "threads", NULL, 0, CONF_INT,
	    CONF_FIELD(ctx_threads), 0, 65536, NULL, "0", NULL, NULL,
	    CONF_RELOAD },
	{ "limits", "map_bytes", NULL, 0, CONF_BYTES, CONF_FIELD(map_bytes),
	    0, UINT64_MAX, NULL, "0", NULL, NULL, CONF_RELOAD },
	{ "limits", "forks", NULL, 0, CONF_INT,
	    CONF_FIELD(region_forks), 0, 65536, NULL, "64", NULL, NULL,
	    CONF_RELOAD | CONF_UNLIMITED },
	{ "pool", "enable", "pool", 0, CONF_BOOL, CONF_FIELD(pool), 0, 1,
	    NULL, "yes", "on|off", "keep a pre-zeroed pool of huge pages",
	    CONF_RELOAD },
	{ "pool", "size_2m", NULL, 0, CONF_POOL_SIZE, CONF_FIELD(pool_size[0]),
	    CONF_PAGE_2M, 0, NULL, "all", NULL, NULL, CONF_RELOAD },
	{ "pool", "size_1g", NULL, 0, CONF_POOL_SIZE, CONF_FIELD(pool_size[1]),
	    CONF_PAGE_1G, 0, NULL, "all", NULL, NULL, CONF_RELOAD },
	{ "pool", "reserve_2m", NULL, 0, CONF_BYTES,
	    CONF_FIELD(pool_reserve[0]), 0, UINT64_MAX, NULL, "2G", NULL, NULL,
	    CONF_RELOAD },
	{ "pool", "reserve_1g", NULL, 0, CONF_BYTES,
	    CONF_FIELD(pool_reserve[1]), 0, UINT64_MAX, NULL, "2G", NULL, NULL,
	    CONF_RELOAD },
	{ "pool", "gbs", NULL, 0, CONF_GBS, CONF_FIELD(pool_gbs), 0,
	    CONF_GBS_MAX, NULL, "0", NULL, NULL, CONF_RELOAD | CONF_UNLIMITED },
	{ "pool", "uid_bytes", NULL, 0, CONF_BYTES, CONF_FIELD(pool_uid_bytes),
	    0, UINT64_MAX, NULL, "0", NULL, NULL,
	    CONF_RELOAD | CONF_UNLIMITED },
	{ "pool", "uid_share", NULL, 0, CONF_INT, CONF_FIELD(pool_uid_share),
	    0, 100, NULL, "100", NULL, NULL, CONF_RELOAD | CONF_UNLIMITED },
	{ "pool", "quiet_ms", NULL, 0, CONF_INT, CONF_FIELD(pool_quiet_ms),
	    0, 3600000, NULL, "2000", NULL, NULL, CONF_RELOAD },
	{ "pool", "short_hold_ms", NULL, 0, CONF_INT,
	    CONF_FIELD(pool_short_hold_ms), 0, 3600000, NULL, "5000", NULL,
	    NULL, CONF_RELOAD },
	{ "policy", "intercept", "intercept", 0, CONF_WORD,
	    CONF_FIELD(intercept), 0, 0, conf_intercepts, "auto", "auto|always",
	    "trap faults only while a range holds garbage",
	    CONF_RELOAD },
	{ "policy", "step_aside", "step-aside", 0, CONF_WORD,
	    CONF_FIELD(step_aside), 0, 0, conf_asides, "auto",
	    "auto|never|always",
	    "leave garbage to the kernel when we cannot keep up", CONF_RELOAD },
};
#define CONF_NKEYS	(sizeof(conf_keys) / sizeof(conf_keys[0]))

/* The i-th key of the table, NULL past the last. */
const struct conf_key *
conf_key_at(size_t i)
{
	return (i < CONF_NKEYS ? &conf_keys[i] : NULL);
}

const struct conf_key *
conf_key_find(const char *section, const char *name)
{
	size_t	i;

	for (i = 0; i < CONF_NKEYS; i++)
		if (strcmp(conf_keys[i].section, section) == 0 &&
		    strcmp(conf_keys[i].name, name) == 0)
			return (&conf_keys[i]);
	return (NULL);
}

/* The defaults: each key's, read as the file would. */
void
conf_defaults(struct conf *c)
{
	char	why[256];
	size_t	i;

	memset(c, 0, sizeof(*c));
	for (i = 0; i < CONF_NKEYS; i++)
		if (conf_set(c, &conf_keys[i], conf_keys[i].def, 0, why,
		    sizeof(why)) == -1)
			abort();	/* the table is wrong: test-conf says */
}

/* A byte count: decimal digits, then K, M, G or T (either case) or none. */
int
conf_parse_bytes(const char *s, uint64_t *out)
{
	return (size_parse(s, out));
}

/* A whole number from 0 to max, digits only. */
static int
conf_parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	char			*end;
	unsigned long long	 v;

	if (*s < '0' || *s > '9')
		return (-1);
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v > max)
		return (-1);
	*out = v;
	return (0);
}

/* The spellings of a boolean that people write in INI files. */
static int
conf_parse_bool(const char *s, int *out)
{
	static const char	*yes[] = { "yes", "on", "true", "1" };
	static const char	*no[] = { "no", "off", "false", "0" };
	size_t			 i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = 1;
			return (0);
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = 0;
			return (0);
		}
	}
	return (-1);
}

/* A rate in GB/s: a finite decimal number, 0 or more. */
static int
conf_parse_gbs(const char *s, double *out)
{
	char	*end;
	double	 v;

	/* Not "inf", "nan", a sign or hexadecimal: plain decimal only. */
	if ((*s < '0' || *s > '9') && *s != '.')
		return (-1);
	if (strpbrk(s, "xX") != NULL)
		return (-1);
	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < 0)
		return (-1);
	*out = v;
	return (0);
}

/* "auto" is stored as "", the daemon's way of saying "choose at start". */
static int
conf_parse_kernel(const char *s, int hot, char *out, size_t size)
{
	const struct clear_kernel	*k;

	if (strcmp(s, "auto") == 0) {
		memset(out, 0, size);
		return (0);
	}
	if ((k = clear_kernel_by_name(s)) == NULL || strlen(k->name) >= size)
		return (-1);
	/* The hot kernel must leave the neighbourhood in the cache. */
	if (hot && k->nontemporal)
		return (-1);
	memset(out, 0, size);
	memcpy(out, k->name, strlen(k->name));
	return (0);
}

/*
 * A pool size: "SIZE" for every node, or "NODE:SIZE,NODE:SIZE" (the nodes
 * not named get none).  Each a whole number of pages of page bytes.
 */
static int
conf_parse_pool_size(const char *s, uint64_t page, uint64_t *out)
{
	uint64_t	 v, node, sizes[TOPO_NODES_MAX];
	char		 buf[64];
	const char	*p = s, *q, *colon;
	size_t		 n;
	int		 i;

	if (strcmp(s, "all") == 0) {
		/* Every free page above the reserve (pool-fill.c). */
		for (i = 0; i < TOPO_NODES_MAX; i++)
			out[i] = UINT64_MAX;
		return (0);
	}
	if (strchr(s, ':') == NULL) {
		if (conf_parse_bytes(s, &v) == -1 || v % page != 0)
			return (-1);
		for (i = 0; i < TOPO_NODES_MAX; i++)
			out[i] = v;
		return (0);
	}
	memset(sizes, 0, sizeof(sizes));
	while (*p != '\0') {
		q = strchr(p, ',');
		n = q != NULL ? (size_t)(q - p) : strlen(p);
		if (n == 0 || n >= sizeof(buf))
			return (-1);
		memcpy(buf, p, n);
		buf[n] = '\0';
		if ((colon = strchr(buf, ':')) == NULL)
			return (-1);
		buf[colon - buf] = '\0';
		if (conf_parse_uint(buf, TOPO_NODES_MAX - 1, &node) == -1 ||
		    conf_parse_bytes(colon + 1, &v) == -1 || v % page != 0)
			return (-1);
		sizes[node] = v;
		p += n;
		if (*p == ',' && *++p == '\0')
			return (-1);
	}
	memcpy(out, sizes, sizeof(sizes));
	return (0);
}

/* "8M" rather than 8388608: how sizes are written back and in messages. */
static void
conf_format_bytes(uint64_t v, char *buf, size_t len)
{
	static const char	 suffix[] = "KMGT";
	int			 i;

	for (i = 4; i > 0; i--) {
		if (v != 0 && v % (1ULL << (10 * i)) == 0) {
			snprintf(buf, len, "%llu%c",
			    (unsigned long long)(v >> (10 * i)), suffix[i - 1]);
			return;
		}
	}
	snprintf(buf, len, "%llu", (unsigned long long)v);
}

/* "a, b or c" of a NULL-terminated list, after prefix. */
static void
conf_format_words(const char *prefix, const char *const *words, char *buf,
    size_t len)
{
	size_t	i, used;

	snprintf(buf, len, "%s", prefix);
	for (i = 0; words[i] != NULL; i++) {
		used = strlen(buf);
		snprintf(buf + used, len - used, "%s%s", i == 0 ? "" :
		    words[i + 1] == NULL ? " or " : ", ", words[i]);
	}
}

/* The clear kernels a key takes, "auto" first. */
static void
conf_format_kernels(int hot, char *buf, size_t len)
{
	const char	*names[CLEAR_NKINDS + 2];
	size_t		 n = 0;
	int		 i;

	names[n++] = "auto";
	for (i = 0; i < CLEAR_NKINDS; i++)
		if (!hot || !clear_kernel(i)->nontemporal)
			names[n++] = clear_kernel(i)->name;
	names[n] = NULL;
	conf_format_words("", names, buf, len);
}

/*
 * What k takes, for "NAME must be EXPECT, not 'VALUE'", written from its
 * type and range: the one place a range is spelled out.
 */
void
conf_expect(const struct conf_key *k, int option, char *buf, size_t len)
{
	char		 lo[32], hi[32];
	const char	*zero = k->flags & CONF_UNLIMITED ? " (0: no limit)" : "";
	uint64_t	 min = k->min;

	if (option && (k->flags & CONF_OPT_NOZERO) && min == 0)
		min = 1;
	conf_format_bytes(min, lo, sizeof(lo));
	conf_format_bytes(k->max, hi, sizeof(hi));
	switch (k->type) {
	case CONF_PATH:
		snprintf(buf, len, "a path of %llu to %llu bytes",
		    (unsigned long long)min, (unsigned long long)k->max);
		break;
	case CONF_INT:
	case CONF_GBS:
		snprintf(buf, len, "a number%s from %llu to %llu%s",
		    k->type == CONF_GBS ? " of GB/s" : "",
		    (unsigned long long)min, (unsigned long long)k->max, zero);
		break;
	case CONF_BYTES:
		if (k->max == UINT64_MAX)
			snprintf(buf, len, "a size such as 64K, 2M or 1G%s",
			    zero);
		else
			snprintf(buf, len, "a size from %s to %s%s", lo, hi,
			    zero);
		break;
	case CONF_PAGES:
		snprintf(buf, len, "a number of pages such as 4096 or 16M%s",
		    zero);
		break;
	case CONF_EXTENT:
		snprintf(buf, len, "auto or a size from %s to %s", lo, hi);
		break;
	case CONF_BOOL:
		snprintf(buf, len, "%s", option ? "on or off" : "yes or no");
		break;
	case CONF_KERNEL:
	case CONF_HOT_KERNEL:
		conf_format_kernels(k->type == CONF_HOT_KERNEL, buf, len);
		break;
	case CONF_WORD:
		conf_format_words("", k->words, buf, len);
		break;
	case CONF_POOL_SIZE:
		snprintf(buf, len, "all (every free page above the reserve), "
		    "a multiple of %s, or NODE:SIZE,... (such as 0:1G,1:2G)",
		    lo);
		break;
	}
}

/*
 * Set k in c from value, as the file writes it or (option) as the command
 * line does; -1 and why, naming the key or option and what it takes.
 */
int
conf_set(struct conf *c, const struct conf_key *k, const char *value,
    int option, char *why, size_t whylen)
{
	char		*field = (char *)c + k->off;
	char		 expect[160];
	uint64_t	 u, min = k->min;
	double		 d;
	int		 b, i;

	if (option && (k->flags & CONF_OPT_NOZERO) && min == 0)
		min = 1;
	switch (k->type) {
	case CONF_PATH:
		if (strlen(value) < min || strlen(value) > k->max)
			goto bad;
		memset(field, 0, k->size);
		memcpy(field, value, strlen(value));
		break;
	case CONF_INT:
		if (conf_parse_uint(value, k->max, &u) == -1 || u < min)
			goto bad;
		*(int *)field = (int)u;
		break;
	case CONF_BYTES:
	case CONF_PAGES:
		if (conf_parse_bytes(value, &u) == -1 || u < min || u > k->max)
			goto bad;
		*(uint64_t *)field = u;
		break;
	case CONF_EXTENT:
		if (strcmp(value, "auto") == 0)
			u = 0;
		else if (conf_parse_bytes(value, &u) == -1 || u < min ||
		    u > k->max)
			goto bad;
		*(uint64_t *)field = u;
		break;
	case CONF_BOOL:
		if (option && strcmp(value, "on") != 0 &&
		    strcmp(value, "off") != 0)
			goto bad;
		if (conf_parse_bool(value, &b) == -1)
			goto bad;
		*(int *)field = b;
		break;
	case CONF_GBS:
		if (conf_parse_gbs(value, &d) == -1 || d < (double)min ||
		    d > (double)k->max)
			goto bad;
		*(double *)field = d;
		break;
	case CONF_KERNEL:
	case CONF_HOT_KERNEL:
		if (conf_parse_kernel(value, k->type == CONF_HOT_KERNEL,
		    field, k->size) == -1)
			goto bad;
		break;
	case CONF_WORD:
		for (i = 0; k->words[i] != NULL; i++)
			if (strcmp(value, k->words[i]) == 0)
				break;
		if (k->words[i] == NULL)
			goto bad;
		*(int *)field = i;
		break;
	case CONF_POOL_SIZE:
		if (conf_parse_pool_size(value, k->min, (uint64_t *)field) ==
		    -1)
			goto bad;
		break;
	}
	return (0);
bad:
	conf_expect(k, option, expect, sizeof(expect));
	snprintf(why, whylen, "%s%s must be %s, not '%s'", option ? "--" : "",
	    option ? k->option : k->name, expect, value);
	return (-1);
}

/* A rate as short as it reads back exactly. */
static void
conf_format_gbs(double v, char *buf, size_t len)
{
	int	prec;

	for (prec = 1; prec < 17; prec++) {
		snprintf(buf, len, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			return;
	}
	snprintf(buf, len, "%.17g", v);
}

/* A pool size as the file writes it: one size, or NODE:SIZE of some. */
static void
conf_format_pool_size(const uint64_t *v, char *buf, size_t len)
{
	char	one[32];
	size_t	used;
	int	i, same = 1;

	for (i = 1; i < TOPO_NODES_MAX; i++)
		if (v[i] != v[0])
			same = 0;
	if (same) {
		if (v[0] == UINT64_MAX)
			snprintf(buf, len, "all");
		else
			conf_format_bytes(v[0], buf, len);
		return;
	}
	buf[0] = '\0';
	for (i = 0; i < TOPO_NODES_MAX; i++) {
		if (v[i] == 0)
			continue;
		conf_format_bytes(v[i], one, sizeof(one));
		used = strlen(buf);
		snprintf(buf + used, len - used, "%s%d:%s", used == 0 ? "" : ",",
		    i, one);
	}
}

/* k's value in c, as the file writes it: conf_set reads it back. */
void
conf_format(const struct conf *c, const struct conf_key *k, char *buf,
    size_t len)
{
	const char	*field = (const char *)c + k->off;
	uint64_t	 u;
	int		 i;

	switch (k->type) {
	case CONF_PATH:
		snprintf(buf, len, "%.*s", (int)k->size, field);
		break;
	case CONF_INT:
		snprintf(buf, len, "%d", *(const int *)field);
		break;
	case CONF_BYTES:
	case CONF_PAGES:
	case CONF_EXTENT:
		memcpy(&u, field, sizeof(u));
		if (k->type == CONF_EXTENT && u == 0)
			snprintf(buf, len, "auto");
		else
			conf_format_bytes(u, buf, len);
		break;
	case CONF_BOOL:
		snprintf(buf, len, "%s", *(const int *)field ? "yes" : "no");
		break;
	case CONF_GBS:
		conf_format_gbs(*(const double *)field, buf, len);
		break;
	case CONF_KERNEL:
	case CONF_HOT_KERNEL:
		snprintf(buf, len, "%.*s", (int)k->size, *field != '\0' ?
		    field : "auto");
		break;
	case CONF_WORD:
		i = *(const int *)field;
		snprintf(buf, len, "%s", i >= 0 && k->words[i] != NULL ?
		    k->words[i] : "?");
		break;
	case CONF_POOL_SIZE:
		conf_format_pool_size((const uint64_t *)field, buf, len);
		break;
	}
}

/* Whether a and b hold the same value of k (a string up to its NUL). */
int
conf_same(const struct conf *a, const struct conf *b, const struct conf_key *k)
{
	const char	*fa = (const char *)a + k->off;
	const char	*fb = (const char *)b + k->off;

	if (k->type == CONF_PATH || k->type == CONF_KERNEL ||
	    k->type == CONF_HOT_KERNEL)
		return (strncmp(fa, fb, k->size) == 0);
	return (memcmp(fa, fb, k->size) == 0);
}

/*
 * The keys SIGHUP cannot change that differ between a and b, named in
 * names ("[clear] extent, [workers] route"); how many.
 */
int
conf_restart_diff(const struct conf *a, const struct conf *b, char *names,
    size_t len)
{
	const struct conf_key	*k;
	size_t			 i, used;
	int			 n = 0;

	if (len > 0)
		names[0] = '\0';
	for (i = 0; i < CONF_NKEYS; i++) {
		k = &conf_keys[i];
		if ((k->flags & CONF_RELOAD) || conf_same(a, b, k))
			continue;
		used = strlen(names);
		snprintf(names + used, len - used, "%s[%s] %s", n == 0 ? "" :
		    ", ", k->section, k->name);
		n++;
	}
	return (n);
}

/* Take into running the keys of next that SIGHUP changes. */
void
conf_reload(struct conf *running, const struct conf *next)
{
	size_t	i;

	for (i = 0; i < CONF_NKEYS; i++)
		if (conf_keys[i].flags & CONF_RELOAD)
			memcpy((char *)running + conf_keys[i].off,
			    (const char *)next + conf_keys[i].off,
			    conf_keys[i].size);
}

/*
 * One section as "key=value ..." (only what SIGHUP changes if reload_only),
 * for the log; NULL if it has no such key.
 */
const char *
conf_text(const struct conf *c, const char *section, int reload_only,
    char *buf, size_t len)
{
	char	value[256];
	size_t	i, used;
	int	n = 0;

	if (len > 0)
		buf[0] = '\0';
	for (i = 0; i < CONF_NKEYS; i++) {
		if (strcmp(conf_keys[i].section, section) != 0 ||
		    (reload_only && !(conf_keys[i].flags & CONF_RELOAD)))
			continue;
		conf_format(c, &conf_keys[i], value, sizeof(value));
		used = strlen(buf);
		snprintf(buf + used, len - used, "%s%s=%s", n++ == 0 ? "" : " ",
		    conf_keys[i].name, value);
	}
	return (n > 0 ? buf : NULL);
}

/* What the workers run with, from the settings. */
void
conf_worker(const struct conf *c, int nworkers, struct worker_config *w)
{
	memset(w, 0, sizeof(*w));
	w->nworkers = nworkers;
	w->spin_us = c->spin_us;
	w->route = (enum worker_route_mode)c->route;
	w->hot_size = c->hot_size;
	w->extent_max = c->extent;
	w->split = c->split;
}
