/*
 * hpzctl-pool.c - the pre-zeroed pools (struct hpz_pool_info) as hpzctl
 * shows them: a line of status, a table, JSON objects, a line of top and
 * Prometheus metrics.  The numbers are listed once, in HPZCTL_POOL_FIELDS;
 * the table's columns, the JSON keys and the metrics are made from it.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <json.h>

#include "hpz.h"
#include "size.h"
#include "hpzctl.h"

/*
 * Every number of struct hpz_pool_info but its page size, node and
 * enabled (which name a pool or say whether it runs), in the order of the
 * table's columns:
 *
 *	name	the field, and its JSON key
 *	col	the table's column header, NULL for no column
 *	width	the column's width
 *	kind	counter or gauge (Prometheus)
 *	prom	its Prometheus metric after "hpzerod_"
 *	help	Prometheus HELP
 *
 * fill_ns is nanoseconds: its column is the fill rate (GB/s of the pages
 * filled over it) and its metric seconds.
 */
#define HPZCTL_POOL_FIELDS(X)						\
	X(ready_pages, "ready", 8, gauge, "pool_ready_pages",		\
	    "Pages allocated ahead and zero, waiting for a region.")	\
	X(target_pages, "target", 8, gauge, "pool_target_pages",	\
	    "Pages the pool is set to hold.")				\
	X(reserve_pages, "reserve", 8, gauge, "pool_reserve_pages",	\
	    "Free pages the pool leaves to other programs.")		\
	X(host_avail_pages, "host", 8, gauge, "pool_host_free_pages",	\
	    "Free, unreserved pages of the host, as the pool last saw.") \
	X(filled_pages, "allocated", 10, counter,			\
	    "pool_filled_pages_total", "Pages the pool allocated.")	\
	X(fill_ns, "GB/s", 9, counter, "pool_fill_seconds_total",	\
	    "Time the pool spent allocating its pages.")		\
	X(handouts, "handouts", 9, counter, "pool_handouts_total",	\
	    "Pool files handed to clients.")				\
	X(handout_pages, "pages", 8, counter,				\
	    "pool_handout_pages_total",					\
	    "Pages in the pool files handed to clients.")		\
	X(misses, "misses", 8, counter, "pool_misses_total",		\
	    "Requests for a pool file that found none ready.")		\
	X(yielded_pages, "yielded", 8, counter,				\
	    "pool_yielded_pages_total",					\
	    "Pages the pool gave back because the host ran short.")	\
	X(refused, NULL, 0, counter, "pool_refused_total",		\
	    "Requests for a pool file over the uid's limit.")

struct hpzctl_pool_field {
	const char	*name;
	size_t		 offset;
	const char	*col;
	int		 width;
	const char	*kind;
	const char	*prom;
	const char	*help;
};

#define HPZCTL_POOL_FIELD(f, col, width, kind, prom, help)		\
	{ #f, offsetof(struct hpz_pool_info, f), col, width, #kind,	\
	    "hpzerod_" prom, help },

static const struct hpzctl_pool_field hpzctl_pool_fields[] = {
	HPZCTL_POOL_FIELDS(HPZCTL_POOL_FIELD)
};

#define HPZCTL_POOL_NFIELDS \
	(sizeof hpzctl_pool_fields / sizeof hpzctl_pool_fields[0])
#define HPZCTL_POOL_MAX	128

static size_t	hpzctl_pool_get(struct hpz_pool_info *, size_t);
static unsigned long long hpzctl_pool_value(const struct hpz_pool_info *,
		    const struct hpzctl_pool_field *);
static int	hpzctl_pool_is_ns(const struct hpzctl_pool_field *);
static const char *hpzctl_pool_page_name(unsigned long long, char *,
		    size_t);
static double	hpzctl_pool_rate(const struct hpz_pool_info *);

/* The daemon's pools into info; 0 when it has none or does not say. */
static size_t
hpzctl_pool_get(struct hpz_pool_info *info, size_t max)
{
	size_t	n = 0;

	if (hpz_pool_status(info, max, &n) != 0)
		return (0);
	return (n < max ? n : max);
}

static unsigned long long
hpzctl_pool_value(const struct hpz_pool_info *p,
    const struct hpzctl_pool_field *f)
{
	unsigned long long	v;

	memcpy(&v, (const char *)p + f->offset, sizeof v);
	return (v);
}

/* The one field that is a time, not a count of pages or files. */
static int
hpzctl_pool_is_ns(const struct hpzctl_pool_field *f)
{
	return (f->offset == offsetof(struct hpz_pool_info, fill_ns));
}

/* "2 MiB" or "1 GiB". */
static const char *
hpzctl_pool_page_name(unsigned long long size, char *buf, size_t len)
{
	return (size_format(SIZE_FMT_DECIMAL, size, buf, len));
}

/* Pages a second the filler allocated, while it allocated. */
static double
hpzctl_pool_rate(const struct hpz_pool_info *p)
{
	return (p->fill_ns == 0 ? 0.0 : (double)p->filled_pages /
	    ((double)p->fill_ns / 1e9));
}

/* hpzctl status: two lines a pool, in words. */
void
hpzctl_pool_status(void)
{
	static struct hpz_pool_info	 info[HPZCTL_POOL_MAX];
	const struct hpz_pool_info	*p;
	char				 b1[32], b2[32];
	size_t				 i, n = hpzctl_pool_get(info,
					     HPZCTL_POOL_MAX);

	for (i = 0; i < n; i++) {
		p = &info[i];
		hpzctl_pool_page_name(p->page_size, b1, sizeof b1);
		printf("  %-18s %s pages, node %d: %s, %llu of %llu ready "
		    "(%s), keeps %llu free (the host has %llu)\n",
		    i == 0 ? "pool:" : "", b1, p->node, p->enabled ? "on" :
		    "off", p->ready_pages, p->target_pages,
		    size_format(SIZE_FMT_DECIMAL, p->ready_pages *
		    p->page_size, b2, sizeof b2),
		    p->reserve_pages, p->host_avail_pages);
		printf("  %-18s %llu allocated (%.0f pages/s, %.1f GB/s), %llu "
		    "files handed out (%llu pages), %llu misses, %llu refused, "
		    "%llu given back\n", "", p->filled_pages,
		    hpzctl_pool_rate(p), hpzctl_gbs(p->filled_pages *
		    p->page_size, p->fill_ns), p->handouts, p->handout_pages,
		    p->misses, p->refused, p->yielded_pages);
	}
}

/* hpzctl stats: the "pool" table, a column a field that has one. */
void
hpzctl_pool_table(void)
{
	static struct hpz_pool_info	 info[HPZCTL_POOL_MAX];
	const struct hpzctl_pool_field	*f;
	const struct hpz_pool_info	*p;
	char				 b1[32];
	size_t				 i, k, n = hpzctl_pool_get(info,
					     HPZCTL_POOL_MAX);

	if (n == 0)
		return;
	printf("\npool\n");
	printf("  %7s %4s %3s", "page", "node", "on");
	for (k = 0; k < HPZCTL_POOL_NFIELDS; k++)
		if ((f = &hpzctl_pool_fields[k])->col != NULL)
			printf(" %*s", f->width, f->col);
	printf("\n");
	for (i = 0; i < n; i++) {
		p = &info[i];
		printf("  %7s %4d %3s", hpzctl_pool_page_name(p->page_size,
		    b1, sizeof b1), p->node, p->enabled ? "yes" : "no");
		for (k = 0; k < HPZCTL_POOL_NFIELDS; k++) {
			if ((f = &hpzctl_pool_fields[k])->col == NULL)
				continue;
			if (hpzctl_pool_is_ns(f))
				printf(" %*.1f", f->width, hpzctl_gbs(
				    p->filled_pages * p->page_size,
				    hpzctl_pool_value(p, f)));
			else
				printf(" %*llu", f->width,
				    hpzctl_pool_value(p, f));
		}
		printf("\n");
	}
}

/* "pools": one object a page size and node, a key a field. */
int
hpzctl_pool_json(struct json_object *obj)
{
	static struct hpz_pool_info	 info[HPZCTL_POOL_MAX];
	const struct hpz_pool_info	*p;
	struct json_object		*arr, *r;
	size_t				 i, k, n = hpzctl_pool_get(info,
					     HPZCTL_POOL_MAX);

	if ((arr = json_object_new_array()) == NULL ||
	    json_object_object_add(obj, "pools", arr) != 0)
		return (-1);
	for (i = 0; i < n; i++) {
		p = &info[i];
		if ((r = json_object_new_object()) == NULL ||
		    json_object_array_add(arr, r) != 0 ||
		    hpzctl_json_add(r, "page_size", p->page_size) != 0 ||
		    hpzctl_json_add(r, "node", (unsigned long long)p->node) !=
		    0 ||
		    json_object_object_add(r, "enabled",
		    json_object_new_boolean(p->enabled)) != 0)
			return (-1);
		for (k = 0; k < HPZCTL_POOL_NFIELDS; k++)
			if (hpzctl_json_add(r, hpzctl_pool_fields[k].name,
			    hpzctl_pool_value(p, &hpzctl_pool_fields[k])) != 0)
				return (-1);
	}
	return (0);
}

/* hpzctl top: a line a pool, its level and what came since the last. */
void
hpzctl_pool_top(double secs)
{
	static struct hpz_pool_info	 prev[HPZCTL_POOL_MAX];
	static size_t			 pn;
	struct hpz_pool_info		 cur[HPZCTL_POOL_MAX];
	const struct hpz_pool_info	*c, *p;
	char				 b1[32];
	size_t				 i, j, n = hpzctl_pool_get(cur,
					     HPZCTL_POOL_MAX);

	for (i = 0; i < n; i++) {
		c = &cur[i];
		for (j = 0, p = NULL; j < pn; j++)
			if (prev[j].page_size == c->page_size &&
			    prev[j].node == c->node)
				p = &prev[j];
		printf("  %-14s %s n%d %llu/%llu ready, filled %.1f pages/s, "
		    "%.1f files/s handed out, %.1f given back/s\n",
		    i == 0 ? "pool:" : "", hpzctl_pool_page_name(c->page_size,
		    b1, sizeof b1), c->node, c->ready_pages, c->target_pages,
		    p == NULL ? 0.0 : (double)HPZCTL_DELTA(c, p, filled_pages) /
		    secs, p == NULL ? 0.0 : (double)HPZCTL_DELTA(c, p,
		    handouts) / secs, p == NULL ? 0.0 :
		    (double)HPZCTL_DELTA(c, p, yielded_pages) / secs);
	}
	memcpy(prev, cur, n * sizeof(cur[0]));
	pn = n;
}

/* hpzctl prometheus: a family a field, labelled by page size and node. */
void
hpzctl_pool_prom(FILE *f)
{
	static struct hpz_pool_info	 info[HPZCTL_POOL_MAX];
	const struct hpzctl_pool_field	*m;
	unsigned long long		 v;
	size_t				 i, k, n = hpzctl_pool_get(info,
					     HPZCTL_POOL_MAX);

	if (n == 0)
		return;
	for (k = 0; k < HPZCTL_POOL_NFIELDS; k++) {
		m = &hpzctl_pool_fields[k];
		hpzctl_prom_head(f, m->prom, m->kind, m->help);
		for (i = 0; i < n; i++) {
			v = hpzctl_pool_value(&info[i], m);
			fprintf(f, "%s{page_size=\"%llu\",node=\"%d\"} ",
			    m->prom, info[i].page_size, info[i].node);
			if (hpzctl_pool_is_ns(m))
				fprintf(f, "%.9f\n", (double)v / 1e9);
			else
				fprintf(f, "%llu\n", v);
		}
	}
}
