/*
 * util.h - what the client programs (hpzctl, hpz-demo, hpz-bench) all
 * need: the monotonic clock, sizes printed for people, sizes parsed from
 * their command lines.  Not installed.
 */
#ifndef HPZ_CLIENT_UTIL_H
#define HPZ_CLIENT_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* How util_size writes n bytes. */
enum util_size_style {
	UTIL_SIZE_EXACT,	/* the largest unit n is whole in: 1536 MiB */
	UTIL_SIZE_ROUND,	/* that, or two decimals of the next: 1.50 GiB */
	UTIL_SIZE_DECIMAL,	/* two decimals of the largest unit: 1.50 GiB */
};

uint64_t	 util_now_ns(void);
double		 util_now_s(void);
const char	*util_size(enum util_size_style, uint64_t n, char *buf,
		    size_t len);
int		 util_parse_size(const char *s, uint64_t max, size_t *out);

#endif /* HPZ_CLIENT_UTIL_H */
