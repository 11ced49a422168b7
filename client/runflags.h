/*
 * runflags.h - the region flags hpz-run and its preload library take by
 * name (HPZ_RUN_FLAGS, hpz-run -f).  Not installed.
 */
#ifndef HPZ_RUNFLAGS_H
#define HPZ_RUNFLAGS_H

#include <stddef.h>

/* Not a region flag: hpz-run's memfd_create hook takes no pool file. */
#define RUNFLAG_NOPOOL	0x00010000u

/* runflags.c */
int		 runflags_parse(const char *s, unsigned int *out, char *bad,
		    size_t badlen);
const char	*runflags_text(unsigned int flags, char *buf, size_t len);
const char	*runflags_valid(char *buf, size_t len);

#endif /* HPZ_RUNFLAGS_H */
