/*
 * itest.h - helpers for the integration tests: they run against a real
 * hpzerod started by run.sh ($HPZ_SOCKET, $HPZD_PID).
 */
#ifndef ITEST_H
#define ITEST_H

#include <stddef.h>
#include <stdint.h>

#include "hpz.h"

#pragma GCC diagnostic ignored "-Wmissing-prototypes"

#define MiB	(1UL << 20)
#define GiB	(1UL << 30)

long		 itest_free_pages(unsigned long page_kib);
void		 itest_need_pages(unsigned long page_kib, long n);
void		 itest_create(struct hpz_region *, size_t, unsigned int);
size_t		 itest_count_nonzero(const void *, size_t, size_t *first);
size_t		 itest_count_not(const void *, size_t, unsigned char,
		    size_t *first);
void		 itest_touch_read(const void *, size_t, size_t step);
struct hpz_status itest_status(void);
struct hpz_status itest_status_faults(const struct hpz_status *,
		    unsigned long long);
int		 itest_raw_connect(void);
int		 itest_state_memfd(uint64_t npages);
const char	*itest_daemon_path(void);
int		 itest_daemon_fds(void);
int		 itest_make_uffd(void *addr, size_t len, uint64_t *features,
		    uint64_t *ioctls);

#endif
