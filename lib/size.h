/*
 * size.h - sizes written by people ("64M", "2G", "4096"), for hpzerod's
 * settings and the client programs, and sizes printed for them.  Not
 * installed.
 */
#ifndef HPZ_SIZE_H
#define HPZ_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* How size_format writes n bytes. */
enum size_style {
	SIZE_FMT_EXACT,		/* the largest unit n is whole in: 1536 MiB */
	SIZE_FMT_ROUND,		/* that, or two decimals of the next: 1.50 GiB */
	SIZE_FMT_DECIMAL,	/* two decimals of the largest unit: 1.50 GiB */
};

/* size.c */
int		 size_parse(const char *s, uint64_t *out);
int		 size_parse_max(const char *s, uint64_t max, size_t *out);
const char	*size_format(enum size_style, uint64_t n, char *buf,
		    size_t len);

#endif /* HPZ_SIZE_H */
