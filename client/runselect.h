/*
 * runselect.h - which of a program's mappings hpz-run registers besides
 * the size rule: by the name of the file (hpz-run -n, -x) or by the file
 * itself (hpz-run -F, an fd hpz-run passes on).  Not installed.
 */
#ifndef HPZ_RUNSELECT_H
#define HPZ_RUNSELECT_H

#include <stddef.h>
#include <sys/types.h>

/* The environment hpz-run sets and the preload library reads. */
#define RUNSELECT_ENV_NAME	"HPZ_RUN_NAME"		/* patterns, a line each */
#define RUNSELECT_ENV_EXCLUDE	"HPZ_RUN_EXCLUDE"	/* patterns, a line each */
#define RUNSELECT_ENV_FILE	"HPZ_RUN_FILE"		/* DEV:INO, a line each */

struct runselect {
	char	*names;		/* NULL: no name rule */
	char	*excludes;	/* NULL: nothing excluded */
	char	*files;		/* NULL: no file rule */
};

/* runselect.c */
int		 runselect_init(struct runselect *rs, const char *names,
		    const char *excludes, const char *files, char *bad,
		    size_t badlen);
int		 runselect_active(const struct runselect *rs);
int		 runselect_match(const struct runselect *rs, const char *name,
		    dev_t dev, ino_t ino, const char **why);
const char	*runselect_fd_name(int fd, char *buf, size_t len);
int		 runselect_file_line(int fd, char *buf, size_t len);

#endif /* HPZ_RUNSELECT_H */
