/*
 * size.h - sizes written by people ("64M", "2G", "4096"), for hpzerod's
 * settings and the client programs.  Not installed.
 */
#ifndef HPZ_SIZE_H
#define HPZ_SIZE_H

#include <stdint.h>

/* size.c */
int		 size_parse(const char *s, uint64_t *out);

#endif /* HPZ_SIZE_H */
