/*
 * mappers.c - does another process map part of a file?  Garbage (pages
 * after HPZ_DISCARD or hpz_reset, until cleared) is guarded by a uffd in
 * the registering process only: another process that maps the same pages
 * reads the old bytes.  This looks through /proc/PID/maps for a mapping of
 * the same file (device and inode) whose file range overlaps ours.  It
 * sees what this process may read: the processes of its own uid, or all
 * of them for root; a mapping made later, or an fd waiting in a socket,
 * it cannot see.  Built into libhpz and the preload library; it reads with
 * read(2) into the stack and allocates nothing.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include "mappers.h"

/* One line of /proc/PID/maps: "start-end perms offset maj:min inode ...". */
static int
mappers_line(const char *s, const struct stat *sb, uint64_t off, uint64_t len)
{
	unsigned long long	start, end, moff, ino;
	unsigned int		maj, min;

	if (sscanf(s, "%llx-%llx %*s %llx %x:%x %llu", &start, &end, &moff,
	    &maj, &min, &ino) != 6)
		return (0);
	if (ino != (unsigned long long)sb->st_ino ||
	    maj != major(sb->st_dev) || min != minor(sb->st_dev) || end <= start)
		return (0);
	/* File ranges [moff, moff + end - start) and [off, off + len). */
	return (moff < off + len && off < moff + (end - start));
}

/* Does pid map [off, off+len) of the file?  1 yes, 0 no or unreadable. */
static int
mappers_pid(pid_t pid, const struct stat *sb, uint64_t off, uint64_t len)
{
	char	path[64], buf[4096], line[512];
	size_t	ll = 0;
	ssize_t	n, i;
	int	fd, found = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (0);
	while (!found && (n = read(fd, buf, sizeof(buf))) > 0) {
		for (i = 0; i < n && !found; i++) {
			if (buf[i] != '\n') {
				/* The path may be long: the fields come first. */
				if (ll < sizeof(line) - 1)
					line[ll++] = buf[i];
				continue;
			}
			line[ll] = '\0';
			found = mappers_line(line, sb, off, len);
			ll = 0;
		}
	}
	close(fd);
	return (found);
}

/*
 * The first process other than this one that maps part of [off, off+len)
 * of the file open on fd; 0 if none is seen, -1 (errno) if we cannot look.
 */
pid_t
mappers_other(int fd, uint64_t off, uint64_t len)
{
	struct dirent64	*e;
	struct stat	 sb;
	char		 buf[8192] __attribute__((aligned(8))), *end;
	pid_t		 self = getpid(), pid, found = 0;
	long		 n, i, v;
	int		 d;

	if (fstat(fd, &sb) == -1)
		return (-1);
	if ((d = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return (-1);
	while (found == 0 &&
	    (n = syscall(SYS_getdents64, d, buf, sizeof(buf))) > 0) {
		for (i = 0; i < n && found == 0; i += e->d_reclen) {
			e = (struct dirent64 *)(buf + i);
			if (!isdigit((unsigned char)e->d_name[0]))
				continue;
			errno = 0;
			v = strtol(e->d_name, &end, 10);
			if (*end != '\0' || errno != 0 || v <= 0)
				continue;
			pid = (pid_t)v;
			if (pid != self && mappers_pid(pid, &sb, off, len))
				found = pid;
		}
	}
	close(d);
	return (found);
}
