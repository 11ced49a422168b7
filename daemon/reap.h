/*
 * reap.h - closing the descriptors clients passed, off the loop (reap.c).
 */
#ifndef HPZD_REAP_H
#define HPZD_REAP_H

#include <stdint.h>
#include <sys/types.h>

int		 reap_start(void);
void		 reap_stop(void);
void		 reap_block_signal(void);
void		 reap_close(int fd);
void		 reap_defuse(int);
void		 reap_close_here(int fd);
void		 reap_close_conn_here(int fd);
void		 reap_away_add(int n);
void		 reap_close_conn(int fd);
void		 reap_refused(int fd, uid_t uid);
uint64_t	 reap_pending(void);
uint64_t	 reap_slow_count(void);

#endif /* HPZD_REAP_H */
