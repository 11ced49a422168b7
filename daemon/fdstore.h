/*
 * fdstore.h - regions kept in systemd's fd store across a crash (fdstore.c).
 */
#ifndef HPZD_FDSTORE_H
#define HPZD_FDSTORE_H

#include <stdint.h>
#include <sys/types.h>

struct region;

#define FDSTORE_KINDS	4	/* uffd, backing file, state memfd, pidfd */
void		 fdstore_init(int enable);
int		 fdstore_enabled(void);
int		 fdstore_pidfd(pid_t);
void		 fdstore_remember(struct region *);
void		 fdstore_forget(struct region *);
int		 fdstore_parse_name(const char *, uint64_t *id);
void		 fdstore_retake(int n, const int *fds, char **names);

#endif /* HPZD_FDSTORE_H */
