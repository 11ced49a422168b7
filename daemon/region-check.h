/*
 * region-check.h - what a register request must be: its range, its files,
 * its page state, the client's own mapping, the limits (region-check.c).
 */
#ifndef HPZD_REGION_CHECK_H
#define HPZD_REGION_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "region.h"

/* What register learned about a backing file. */
struct backing {
	long			 fs_magic;
	uint64_t		 page_size;
	uint64_t		 size;
	dev_t			 dev;
	ino_t			 ino;
};

int		 region_fail(char *, size_t, int, const char *, ...)
		    __attribute__((format(printf, 4, 5)));
int		 region_check_range(uint64_t addr, uint64_t len, uint64_t offset,
		    uint64_t page_size, const struct backing *b, char *why,
		    size_t whylen);
int		 region_check_backing(int fd, struct backing *b, char *why,
		    size_t whylen);
int		 region_check_uffd(int fd, char *why, size_t whylen);
struct region	*region_conflict(const struct regions *all,
		    const struct client *c, uint64_t addr, uint64_t len,
		    dev_t dev, ino_t ino, uint64_t offset);
int		 region_check_state(int sfd, uint64_t npages, char *why,
		    size_t whylen);
int		 region_check_pages(uint64_t npages, uint64_t page_size,
		    char *why, size_t whylen);
void		 region_limits(uint64_t max_pages);
uint64_t	 region_limit_pages(void);
int		 region_check_mapping(pid_t pid, uint64_t addr, uint64_t len,
		    dev_t dev, ino_t ino, uint64_t offset, char *why,
		    size_t whylen);
int		 region_check_maps_line(const char *line, uint64_t *start,
		    uint64_t *end, uint64_t *off, unsigned int *major,
		    unsigned int *minor, unsigned long *ino, int *shared_rw);

#endif /* HPZD_REGION_CHECK_H */
