/*
 * itest.h - helpers for the integration tests: they run against a real
 * hpzerod started by run.sh ($HPZ_SOCKET, $HPZD_PID).
 */
#ifndef ITEST_H
#define ITEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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
pid_t		 itest_fork_dying(void);
int		 itest_daemon_fds(void);
pid_t		 itest_daemon_pid(void);
unsigned long long itest_daemon_start(pid_t);
void		 itest_kill(pid_t);
int		 itest_make_uffd(void *addr, size_t len, uint64_t *features,
		    uint64_t *ioctls);
void		 itest_expect_bytes(const void *, size_t, unsigned char,
		    int bound_s, const char *what);
void		 itest_register(struct hpz_region *);
void		 itest_assert_zero(const struct hpz_region *, const char *);
void		*itest_alias(const struct hpz_region *);
struct sockaddr_un;
void		 itest_sun(struct sockaddr_un *, const char *path);
uint64_t	 itest_now_ms(void);
double		 itest_now_us(void);
int		 itest_wait_scale(void);
int		 itest_run_bounded(const char *const argv[], int quiet,
		    int timeout_s);

/* What a child printed (stdout and stderr) and its wait status. */
#define ITEST_OUT_MAX	32768
struct itest_out {
	int	 status;
	size_t	 len;
	char	 text[ITEST_OUT_MAX];
};
void		 itest_collect(struct itest_out *, int fd, pid_t pid,
		    int timeout_s, const char *what);
void		 itest_self(char *, size_t);
void		 itest_hpzrun_env(const char *builddir);
int		 itest_child_fail(const char *, ...)
		    __attribute__((format(printf, 1, 2)));
int		 itest_child_check(const void *, size_t, unsigned char,
		    const char *what);

/* The longest a command that should exit at once may run (seconds). */
#define ITEST_RUN_TIMEOUT_S	60

#endif
