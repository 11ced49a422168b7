/*
 * fdstore.h - regions kept in systemd's fd store across a crash (fdstore.c).
 */
#ifndef HPZD_FDSTORE_H
#define HPZD_FDSTORE_H

#include <stdint.h>
#include <sys/types.h>

struct hpz_msg_register;
struct region;

#define FDSTORE_KINDS	4	/* uffd, backing file, state memfd, pidfd */
void		 fdstore_init(int enable);
int		 fdstore_enabled(void);
int		 fdstore_pidfd(pid_t);
void		 fdstore_remember(struct region *);
void		 fdstore_forget(struct region *);
int		 fdstore_parse_name(const char *, uint64_t *id);
/*
 * Makes a region of a stored one for process pid, as a register would, or
 * lets it go with fdstore_release (the control plane's).
 */
typedef void	(*fdstore_adopt_fn)(uint64_t id, pid_t pid,
		    const struct hpz_msg_register *, int *fds);
uint64_t	 fdstore_max_id(int n, const int *fds, char **names);
void		 fdstore_retake(int n, const int *fds, char **names,
		    fdstore_adopt_fn adopt);
void		 fdstore_release(uint64_t id, int *fds, const char *why);

#endif /* HPZD_FDSTORE_H */
