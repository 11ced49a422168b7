/*
 * region-check.c - what a register request must be before a region is
 * made of it: a range of whole pages inside the file, a backing file on
 * hugetlbfs or shmem, a uffd, a page-state memfd of the right size, no
 * conflict with another region, the client's own shared mapping of the
 * file, and [limits] region_pages.  Each check says why in why.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include "hpz.h"
#include "hpz-state.h"

#include "region-check.h"
#include "region.h"

/* Say why in why, return error: the checks' one way to fail. */
int
region_fail(char *why, size_t whylen, int error, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return (error);
}

/* Is the described range a whole number of pages lying inside the file? */
int
region_check_range(uint64_t addr, uint64_t len, uint64_t offset,
    uint64_t page_size, const struct backing *b, char *why, size_t whylen)
{
	if (page_size != b->page_size)
		return (region_fail(why, whylen, -EINVAL,
		    "page size %llu does not match the file's %llu",
		    (unsigned long long)page_size,
		    (unsigned long long)b->page_size));
	if (len == 0)
		return (region_fail(why, whylen, -EINVAL, "empty region"));
	if ((addr | len | offset) % b->page_size != 0)
		return (region_fail(why, whylen, -EINVAL,
		    "addr 0x%llx, len %llu and offset %llu must be multiples "
		    "of the page size %llu", (unsigned long long)addr,
		    (unsigned long long)len, (unsigned long long)offset,
		    (unsigned long long)b->page_size));
	if (addr + len < addr)
		return (region_fail(why, whylen, -EINVAL,
		    "address range wraps"));
	if (offset > b->size || len > b->size - offset)
		return (region_fail(why, whylen, -EINVAL,
		    "region [%llu, %llu) lies past the end of the file "
		    "(%llu bytes)", (unsigned long long)offset,
		    (unsigned long long)(offset + len),
		    (unsigned long long)b->size));
	return (0);
}

/* Is fd a read-write regular file on hugetlbfs or shmem?  Learn its shape. */
int
region_check_backing(int fd, struct backing *b, char *why, size_t whylen)
{
	struct statfs	sfs;
	struct stat	st;
	int		fl;

	if (fstatfs(fd, &sfs) == -1 || fstat(fd, &st) == -1)
		return (region_fail(why, whylen, -EINVAL,
		    "cannot stat the backing fd: %s", strerror(errno)));
	if (!S_ISREG(st.st_mode))
		return (region_fail(why, whylen, -EINVAL,
		    "the backing fd is not a regular file"));
	b->fs_magic = (long)sfs.f_type;
	if (b->fs_magic == HUGETLBFS_MAGIC)
		b->page_size = (uint64_t)sfs.f_bsize;
	else if (b->fs_magic == TMPFS_MAGIC)
		b->page_size = (uint64_t)sysconf(_SC_PAGESIZE);
	else
		return (region_fail(why, whylen, -EINVAL,
		    "the backing file is on a filesystem with magic 0x%lx: "
		    "only hugetlbfs and shmem files can be served",
		    (unsigned long)b->fs_magic));
	fl = fcntl(fd, F_GETFL);
	if (fl == -1 || (fl & O_ACCMODE) != O_RDWR)
		return (region_fail(why, whylen, -EINVAL,
		    "the backing fd is not open read-write"));
	b->size = (uint64_t)st.st_size;
	b->dev = st.st_dev;
	b->ino = st.st_ino;
	return (0);
}

/* Is fd really a userfaultfd? */
int
region_check_uffd(int fd, char *why, size_t whylen)
{
	char	path[64], link[128];
	ssize_t	n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n == -1)
		return (region_fail(why, whylen, -EINVAL,
		    "cannot inspect the uffd: %s", strerror(errno)));
	link[n] = '\0';
	if (strcmp(link, "anon_inode:[userfaultfd]") != 0)
		return (region_fail(why, whylen, -EINVAL,
		    "the fd passed as uffd is not a userfaultfd (%s)", link));
	return (0);
}

/*
 * A region in the way of a new one: the same client's address range, or
 * anyone's range of the same file (two states for one page would let one
 * side expose what the other declared garbage).
 */
struct region *
region_conflict(const struct regions *all, const struct client *c,
    uint64_t addr, uint64_t len, dev_t dev, ino_t ino, uint64_t offset)
{
	struct region	*r;

	TAILQ_FOREACH(r, all, all) {
		if (r->client == c &&
		    region_overlaps(region_addr(r), r->len, addr, len))
			return (r);
		if (r->dev == dev && r->ino == ino &&
		    region_overlaps(r->offset, r->len, offset, len))
			return (r);
	}
	return (NULL);
}

/*
 * Is sfd a page-state memfd for exactly npages pages: a read-write shmem
 * file sealed against shrinking and growing, of HPZ_STATE_SIZE(npages)
 * bytes?  The seals mean our mapping of it can never fault with SIGBUS
 * whatever the client does to its copy, and that its size, which we
 * checked here, is ours to trust from then on (fdstore.c relies on it).
 */
int
region_check_state(int sfd, uint64_t npages, char *why, size_t whylen)
{
	struct statfs	sfs;
	struct stat	st;
	int		seals, fl;

	if (fstatfs(sfd, &sfs) == -1 || fstat(sfd, &st) == -1)
		return (region_fail(why, whylen, -EINVAL,
		    "cannot stat the state fd: %s", strerror(errno)));
	if (!S_ISREG(st.st_mode) || (long)sfs.f_type != TMPFS_MAGIC)
		return (region_fail(why, whylen, -EINVAL,
		    "the state fd is not a memfd"));
	fl = fcntl(sfd, F_GETFL);
	if (fl == -1 || (fl & O_ACCMODE) != O_RDWR)
		return (region_fail(why, whylen, -EINVAL,
		    "the state fd is not open read-write"));
	seals = fcntl(sfd, F_GET_SEALS);
	if (seals == -1 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) !=
	    (F_SEAL_SHRINK | F_SEAL_GROW))
		return (region_fail(why, whylen, -EINVAL,
		    "the state memfd is not sealed against shrinking and "
		    "growing (F_SEAL_SHRINK | F_SEAL_GROW)"));
	if ((uint64_t)st.st_size != HPZ_STATE_SIZE(npages))
		return (region_fail(why, whylen, -EINVAL,
		    "the state memfd holds %llu bytes, %llu pages need "
		    "exactly %llu", (unsigned long long)st.st_size,
		    (unsigned long long)npages,
		    (unsigned long long)HPZ_STATE_SIZE(npages)));
	return (0);
}

/* The most pages a region may have ([limits] region_pages); 0: no limit. */
static uint64_t	 region_pages_max;

void
region_limits(uint64_t max_pages)
{
	region_pages_max = max_pages;
}

uint64_t
region_limit_pages(void)
{
	return (region_pages_max);
}

/* Is a region of npages pages within [limits] region_pages? */
int
region_check_pages(uint64_t npages, uint64_t page_size, char *why,
    size_t whylen)
{
	if (region_pages_max == 0 || npages <= region_pages_max)
		return (0);
	return (region_fail(why, whylen, -EDQUOT,
	    "a region of %llu pages of %llu KiB is over the limit of %llu "
	    "pages a region ([limits] region_pages in hpzerod.conf)",
	    (unsigned long long)npages, (unsigned long long)(page_size >> 10),
	    (unsigned long long)region_pages_max));
}

/*
 * Parse one line of /proc/PID/maps: "start-end perms offset maj:min inode
 * path".  0, or -1 if it is not such a line.
 */
int
region_check_maps_line(const char *line, uint64_t *start, uint64_t *end,
    uint64_t *off, unsigned int *major, unsigned int *minor,
    unsigned long *ino, int *shared_rw)
{
	unsigned long long	a, b, o;
	char			perms[8];

	if (sscanf(line, "%llx-%llx %7s %llx %x:%x %lu", &a, &b, perms, &o,
	    major, minor, ino) != 7 || b <= a || strlen(perms) != 4)
		return (-1);
	*start = a;
	*end = b;
	*off = o;
	*shared_rw = perms[0] == 'r' && perms[1] == 'w' && perms[3] == 's';
	return (0);
}

/*
 * Does the client's own address space map [addr, addr+len) shared and
 * writable from this file at this offset, in one or more adjacent
 * mappings?  Otherwise the client describes memory that is not its own
 * mapping of the file it passed: refused.
 */
int
region_check_mapping(pid_t pid, uint64_t addr, uint64_t len, dev_t dev,
    ino_t ino, uint64_t offset, char *why, size_t whylen)
{
	char		 path[64], line[4096];
	FILE		*f;
	uint64_t	 start, end, off, pos = addr, limit = addr + len;
	unsigned long	 lino;
	unsigned int	 maj, min;
	int		 srw;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return (region_fail(why, whylen, -EPERM,
		    "cannot read the client's mappings: %s", strerror(errno)));
	while (pos < limit && fgets(line, sizeof(line), f) != NULL) {
		if (region_check_maps_line(line, &start, &end, &off, &maj,
		    &min, &lino, &srw) == -1 || end <= pos)
			continue;
		if (start > pos)
			break;	/* a hole */
		if (!srw || makedev(maj, min) != dev || (ino_t)lino != ino ||
		    off + (pos - start) != offset + (pos - addr))
			break;
		pos = end;
	}
	fclose(f);
	if (pos < limit)
		return (region_fail(why, whylen, -EINVAL,
		    "0x%llx is not the client's shared, writable mapping of "
		    "the file it passed at offset %llu",
		    (unsigned long long)pos,
		    (unsigned long long)(offset + (pos - addr))));
	return (0);
}
