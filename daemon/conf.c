/*
 * conf.c - hpzerod.conf, an INI file read with libinih into struct conf.
 * Pure: no logging, no globals; the caller reports the error and applies
 * what was read.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ini.h>

#include "hpzerod.h"
#include "size.h"

#define CONF_SPIN_US_MAX	100000
#define CONF_HOT_SIZE_MAX	(1ULL << 30)
#define CONF_AHEAD_MIN		(4ULL << 20)
#define CONF_AHEAD_MAX		(256ULL << 20)
/*
 * A region costs its state bytes (one a page) in every walk of its state,
 * whatever its pages cost the client: 16M pages is 64 GiB of 4 KiB shmem,
 * 32 TiB of 2 MiB pages; 64M of state a uid, four such regions.  A sparse
 * 1 TiB region of 4 KiB pages (256M pages) is refused.
 */
#define CONF_REGION_PAGES	(16ULL << 20)
#define CONF_STATE_BYTES	(64ULL << 20)
#define CONF_POOL_2M		(1ULL << 30)	/* a node: a 1 GiB region */
#define CONF_POOL_1G		(1ULL << 30)	/* a node: one page */
#define CONF_POOL_RESERVE	(2ULL << 30)	/* free for other programs */

enum conf_type {
	CONF_PATH,		/* char[], 1 .. size-1 bytes */
	CONF_INT,		/* int, min .. max */
	CONF_BYTES,		/* uint64_t, a size from min to max */
	CONF_EXTENT,		/* uint64_t, "auto" (0) or min .. max */
	CONF_BOOL,		/* int, 0 or 1 */
	CONF_GBS,		/* double, finite, 0 or more */
	CONF_KERNEL,		/* char[], a clear kernel or "auto" ("") */
	CONF_HOT_KERNEL,	/* char[], an ordinary-store kernel or "auto" */
	CONF_ROUTE,		/* int, enum worker_route_mode */
	CONF_POOL_SIZE,		/* uint64_t[TOPO_NODES_MAX]: "SIZE" for every
				   node, or "NODE:SIZE,..."; whole pages of
				   min bytes */
	CONF_INTERCEPT,		/* int, INTERCEPT_*: auto or always */
	CONF_ASIDE,		/* int, ASIDE_*: auto, never or always */
};

struct conf_key {
	const char	*section;
	const char	*name;
	enum conf_type	 type;
	size_t		 off;		/* of the field in struct conf */
	size_t		 size;		/* of the field */
	uint64_t	 min;
	uint64_t	 max;
	const char	*expect;	/* "NAME must be EXPECT, not 'VALUE'" */
};

#define CONF_FIELD(f)	offsetof(struct conf, f), \
			sizeof(((struct conf *)NULL)->f)

static const struct conf_key conf_keys[] = {
	{ "daemon", "socket", CONF_PATH, CONF_FIELD(socket), 1,
	    sizeof(((struct conf *)NULL)->socket) - 1, NULL },
	{ "daemon", "workers", CONF_INT, CONF_FIELD(workers), 0,
	    HPZD_WORKERS_MAX, "a number from 0 to 256" },
	{ "clear", "kernel", CONF_KERNEL, CONF_FIELD(clear_kernel), 0, 0,
	    "auto, avx512-nt, avx2-nt, sse2-nt, rep-stosb or memset" },
	{ "clear", "hot_kernel", CONF_HOT_KERNEL, CONF_FIELD(hot_kernel), 0,
	    0, "auto, rep-stosb or memset" },
	{ "clear", "hot_size", CONF_BYTES, CONF_FIELD(hot_size), 0,
	    CONF_HOT_SIZE_MAX, "a size from 0 to 1G" },
	{ "clear", "extent", CONF_EXTENT, CONF_FIELD(extent), PLAN_EXTENT_MIN,
	    PLAN_EXTENT_MAX, "auto or a size from 256K to 64M" },
	{ "workers", "spin_us", CONF_INT, CONF_FIELD(spin_us), 0,
	    CONF_SPIN_US_MAX, "a number from 0 to 100000" },
	{ "workers", "route", CONF_ROUTE, CONF_FIELD(route), 0, 0,
	    "reader, thread or hash" },
	{ "workers", "split", CONF_BOOL, CONF_FIELD(split), 0, 1,
	    "yes or no" },
	{ "background", "scrub", CONF_BOOL, CONF_FIELD(scrub), 0, 1,
	    "yes or no" },
	{ "background", "threads", CONF_INT, CONF_FIELD(scrub_threads), 0,
	    HPZD_WORKERS_MAX, "a number from 0 to 256" },
	{ "background", "gbs", CONF_GBS, CONF_FIELD(background_gbs), 0, 0,
	    "a number of GB/s, 0 or more" },
	{ "background", "client_gbs", CONF_GBS, CONF_FIELD(client_gbs), 0, 0,
	    "a number of GB/s, 0 or more" },
	{ "background", "ahead_min", CONF_BYTES, CONF_FIELD(ahead_min), 0,
	    UINT64_MAX, "a size such as 4M" },
	{ "background", "ahead_max", CONF_BYTES, CONF_FIELD(ahead_max), 0,
	    UINT64_MAX, "a size such as 256M" },
	{ "limits", "clients", CONF_INT, CONF_FIELD(uid_clients), 0,
	    HPZD_CLIENTS_MAX, "a number from 0 to 1024" },
	{ "limits", "regions", CONF_INT, CONF_FIELD(uid_regions), 0,
	    1000000, "a number from 0 to 1000000" },
	{ "limits", "bytes", CONF_BYTES, CONF_FIELD(uid_bytes), 0,
	    UINT64_MAX, "a size such as 64G, or 0" },
	{ "limits", "state_bytes", CONF_BYTES, CONF_FIELD(uid_state_bytes), 0,
	    UINT64_MAX, "a size such as 64M, or 0" },
	{ "limits", "region_pages", CONF_BYTES, CONF_FIELD(region_pages), 0,
	    UINT64_MAX, "a number of pages such as 16777216 or 16M, or 0" },
	{ "pool", "enable", CONF_BOOL, CONF_FIELD(pool), 0, 1, "yes or no" },
	{ "pool", "size_2m", CONF_POOL_SIZE, CONF_FIELD(pool_size[0]),
	    2ULL << 20, 0, "a multiple of 2M, or NODE:SIZE,... (such as "
	    "0:1G,1:512M)" },
	{ "pool", "size_1g", CONF_POOL_SIZE, CONF_FIELD(pool_size[1]),
	    1ULL << 30, 0, "a multiple of 1G, or NODE:SIZE,... (such as "
	    "0:1G,1:2G)" },
	{ "pool", "reserve_2m", CONF_BYTES, CONF_FIELD(pool_reserve[0]), 0,
	    UINT64_MAX, "a size such as 2G, or 0" },
	{ "pool", "reserve_1g", CONF_BYTES, CONF_FIELD(pool_reserve[1]), 0,
	    UINT64_MAX, "a size such as 2G, or 0" },
	{ "pool", "gbs", CONF_GBS, CONF_FIELD(pool_gbs), 0, 0,
	    "a number of GB/s, 0 or more" },
	{ "pool", "uid_bytes", CONF_BYTES, CONF_FIELD(pool_uid_bytes), 0,
	    UINT64_MAX, "a size such as 8G, or 0" },
	{ "policy", "intercept", CONF_INTERCEPT, CONF_FIELD(intercept), 0, 0,
	    "auto or always" },
	{ "policy", "step_aside", CONF_ASIDE, CONF_FIELD(step_aside), 0, 0,
	    "auto, never or always" },
};
#define CONF_NKEYS	(sizeof(conf_keys) / sizeof(conf_keys[0]))

/* What one load has read so far; committed to the caller only whole. */
struct conf_parse {
	FILE		*f;
	struct conf	 c;		/* the caller's, with the file on top */
	int		 line;		/* the line inih is on */
	int		 read_errno;	/* the stream failed, 0: it did not */
	int		 errline;	/* of our first error, 0: none */
	char		 reason[256];
	int		 ahead_line;	/* last ahead_min or ahead_max */
};

static int	conf_fail(struct conf_parse *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));

/* Keep the first error and its line; inih only learns that the line is bad. */
static int
conf_fail(struct conf_parse *p, const char *fmt, ...)
{
	va_list	ap;

	if (p->errline != 0)
		return (0);
	p->errline = p->line;
	va_start(ap, fmt);
	vsnprintf(p->reason, sizeof(p->reason), fmt, ap);
	va_end(ap);
	return (0);
}

/* The defaults, as documented in hpzerod.conf(5) and hpzerod(8). */
void
conf_defaults(struct conf *c)
{
	int	i;

	memset(c, 0, sizeof(*c));
	snprintf(c->socket, sizeof(c->socket), "%s", HPZ_SOCKET_DEFAULT);
	c->workers = 0;
	c->clear_kernel[0] = '\0';
	c->hot_kernel[0] = '\0';
	c->hot_size = PLAN_HOT_DEFAULT;
	c->extent = 0;
	c->spin_us = 50;
	c->route = ROUTE_READER;
	c->split = 1;
	c->scrub = 1;
	c->scrub_threads = 0;
	c->background_gbs = 0;
	c->client_gbs = 0;
	c->ahead_min = CONF_AHEAD_MIN;
	c->ahead_max = CONF_AHEAD_MAX;
	c->uid_clients = 64;
	c->uid_regions = 4096;
	c->uid_bytes = 0;
	c->uid_state_bytes = CONF_STATE_BYTES;
	c->region_pages = CONF_REGION_PAGES;
	c->pool = 1;
	for (i = 0; i < TOPO_NODES_MAX; i++) {
		c->pool_size[0][i] = CONF_POOL_2M;
		c->pool_size[1][i] = CONF_POOL_1G;
	}
	c->pool_reserve[0] = CONF_POOL_RESERVE;
	c->pool_reserve[1] = CONF_POOL_RESERVE;
	c->pool_gbs = 0;
	c->pool_uid_bytes = 0;
	c->intercept = INTERCEPT_AUTO;
	c->step_aside = ASIDE_AUTO;
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
		out[0] = '\0';
		return (0);
	}
	if ((k = clear_kernel_by_name(s)) == NULL || strlen(k->name) >= size)
		return (-1);
	/* The hot kernel must leave the neighbourhood in the cache. */
	if (hot && k->nontemporal)
		return (-1);
	snprintf(out, size, "%s", k->name);
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

/* Set one key of the copy, or say why its value is refused. */
static int
conf_set(struct conf_parse *p, const struct conf_key *k, const char *value)
{
	char		*field = (char *)&p->c + k->off;
	uint64_t	 u;
	double		 d;
	int		 b;

	switch (k->type) {
	case CONF_PATH:
		if (strlen(value) < k->min || strlen(value) > k->max)
			return (conf_fail(p, "%s must be a path of %llu to "
			    "%llu bytes, not '%s'", k->name,
			    (unsigned long long)k->min,
			    (unsigned long long)k->max, value));
		memcpy(field, value, strlen(value) + 1);
		break;
	case CONF_INT:
		if (conf_parse_uint(value, k->max, &u) == -1 || u < k->min)
			goto bad;
		*(int *)field = (int)u;
		break;
	case CONF_BYTES:
		if (conf_parse_bytes(value, &u) == -1 || u < k->min ||
		    u > k->max)
			goto bad;
		*(uint64_t *)field = u;
		break;
	case CONF_EXTENT:
		if (strcmp(value, "auto") == 0)
			u = 0;
		else if (conf_parse_bytes(value, &u) == -1 || u < k->min ||
		    u > k->max)
			goto bad;
		*(uint64_t *)field = u;
		break;
	case CONF_BOOL:
		if (conf_parse_bool(value, &b) == -1)
			goto bad;
		*(int *)field = b;
		break;
	case CONF_GBS:
		if (conf_parse_gbs(value, &d) == -1)
			goto bad;
		*(double *)field = d;
		break;
	case CONF_KERNEL:
	case CONF_HOT_KERNEL:
		if (conf_parse_kernel(value, k->type == CONF_HOT_KERNEL,
		    field, k->size) == -1)
			goto bad;
		break;
	case CONF_ROUTE:
		if (strcmp(value, "reader") == 0)
			*(int *)field = ROUTE_READER;
		else if (strcmp(value, "thread") == 0)
			*(int *)field = ROUTE_THREAD;
		else if (strcmp(value, "hash") == 0)
			*(int *)field = ROUTE_HASH;
		else
			goto bad;
		break;
	case CONF_POOL_SIZE:
		if (conf_parse_pool_size(value, k->min, (uint64_t *)field) ==
		    -1)
			goto bad;
		break;
	case CONF_INTERCEPT:
		if (strcmp(value, "auto") == 0)
			*(int *)field = INTERCEPT_AUTO;
		else if (strcmp(value, "always") == 0)
			*(int *)field = INTERCEPT_ALWAYS;
		else
			goto bad;
		break;
	case CONF_ASIDE:
		if (strcmp(value, "auto") == 0)
			*(int *)field = ASIDE_AUTO;
		else if (strcmp(value, "never") == 0)
			*(int *)field = ASIDE_NEVER;
		else if (strcmp(value, "always") == 0)
			*(int *)field = ASIDE_ALWAYS;
		else
			goto bad;
		break;
	}
	return (1);
bad:
	return (conf_fail(p, "%s must be %s, not '%s'", k->name, k->expect,
	    value));
}

/* inih's handler: one key = value line of the file. */
static int
conf_handler(void *arg, const char *section, const char *name,
    const char *value)
{
	struct conf_parse	*p = arg;
	size_t			 i;
	int			 known = 0;

	if (p->errline != 0)
		return (0);
	/* Only builds of inih with other options call with NULLs. */
	if (name == NULL)
		return (1);		/* a new section */
	if (value == NULL)
		return (conf_fail(p, "key '%s' has no value", name));
	for (i = 0; i < CONF_NKEYS; i++) {
		if (strcmp(conf_keys[i].section, section) != 0)
			continue;
		known = 1;
		if (strcmp(conf_keys[i].name, name) != 0)
			continue;
		if (strcmp(name, "ahead_min") == 0 ||
		    strcmp(name, "ahead_max") == 0)
			p->ahead_line = p->line;
		return (conf_set(p, &conf_keys[i], value));
	}
	if (*section == '\0')
		return (conf_fail(p, "key '%s' is outside any section", name));
	if (!known)
		return (conf_fail(p, "key '%s' is in unknown section [%s]",
		    name, section));
	return (conf_fail(p, "unknown key '%s' in [%s]", name, section));
}

/*
 * inih's reader: fgets counting lines, so that our errors carry the line
 * inih is on.  It drops leading blanks, since inih would take an indented
 * line for the continuation of the previous value, refuses a line longer
 * than inih's buffer (but a comment), which inih would split in two, and
 * stops after the first error.
 */
static char *
conf_read_line(char *str, int num, void *arg)
{
	struct conf_parse	*p = arg;
	size_t			 len, skip;
	int			 ch;

	if (p->errline != 0)
		return (NULL);
	if (fgets(str, num, p->f) == NULL) {
		if (ferror(p->f))
			p->read_errno = errno != 0 ? errno : EIO;
		return (NULL);
	}
	p->line++;
	len = strlen(str);
	skip = strspn(str, " \t");
	if ((len == 0 || str[len - 1] != '\n') && (ch = getc(p->f)) != EOF) {
		if (len + 1 != (size_t)num) {
			conf_fail(p, "line holds a NUL byte");
			return (NULL);
		}
		if (str[skip] != ';' && str[skip] != '#') {
			conf_fail(p, "line longer than %d characters", num - 3);
			return (NULL);
		}
		/* A long comment is still a comment: drop the rest. */
		while (ch != '\n' && ch != EOF)
			ch = getc(p->f);
	}
	memmove(str, str + skip, len - skip + 1);
	return (str);
}

/* "8M" rather than 8388608, in the messages about sizes. */
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

/* Read path on top of *c; *c changes only if the whole file is good. */
int
conf_load(const char *path, struct conf *c, char *why, size_t whylen)
{
	struct conf_parse	 p;
	char			 min[32], max[32];
	int			 r, error;

	memset(&p, 0, sizeof(p));
	p.c = *c;
	if ((p.f = fopen(path, "re")) == NULL) {
		error = errno;
		snprintf(why, whylen, "cannot open %s: %s", path,
		    strerror(error));
		return (-error);
	}
	r = ini_parse_stream(conf_read_line, &p, conf_handler, &p);
	fclose(p.f);
	if (p.read_errno != 0) {
		snprintf(why, whylen, "cannot read %s: %s", path,
		    strerror(p.read_errno));
		return (-p.read_errno);
	}
	if (r == -2) {
		snprintf(why, whylen, "%s: out of memory", path);
		return (-ENOMEM);
	}
	/* inih goes on after a line it cannot parse: an earlier line wins. */
	if (r > 0 && (p.errline == 0 || r < p.errline)) {
		p.errline = r;
		snprintf(p.reason, sizeof(p.reason), "syntax error: expected "
		    "'[section]', 'key = value' or a comment");
	}
	if (p.errline != 0) {
		snprintf(why, whylen, "%s:%d: %s", path, p.errline, p.reason);
		return (-EINVAL);
	}
	if (p.c.ahead_min > p.c.ahead_max) {
		conf_format_bytes(p.c.ahead_min, min, sizeof(min));
		conf_format_bytes(p.c.ahead_max, max, sizeof(max));
		if (p.ahead_line != 0)
			snprintf(why, whylen, "%s:%d: ahead_min (%s) is larger "
			    "than ahead_max (%s)", path, p.ahead_line, min,
			    max);
		else
			snprintf(why, whylen, "%s: ahead_min (%s) is larger "
			    "than ahead_max (%s)", path, min, max);
		return (-EINVAL);
	}
	*c = p.c;
	return (0);
}
