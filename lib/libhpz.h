/*
 * libhpz.h - private declarations shared by the files of libhpz.
 */
#ifndef LIBHPZ_H
#define LIBHPZ_H

#include "hpz.h"

/* client.c */
int		 lib_fail(int error, const char *fmt, ...)
		    __attribute__((format(printf, 2, 3)));
int		 lib_is_registered(const struct hpz_region *region);
void		 lib_forget(const struct hpz_region *region);

#endif /* LIBHPZ_H */
