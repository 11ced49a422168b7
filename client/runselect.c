/*
 * runselect.c - the selection rules of hpz-run beyond the size: a file
 * name pattern to take (-n) or to leave (-x), or a file given by an open
 * fd (-F), for hpz-run (which checks and passes them on) and the preload
 * library (which applies them to each mapping).
 *
 * A file's name is what /proc/self/fd shows for it, less " (deleted)":
 * "/memfd:NAME" for a memfd, the path for a file.  Patterns are fnmatch(3)
 * patterns without flags, so '*' also matches '/'.
 */
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "runselect.h"

#define RUNSELECT_DELETED	" (deleted)"

static char *
runselect_dup(const char *s)
{
	return (s != NULL && *s != '\0' ? strdup(s) : NULL);
}

/* Is every line of files "DEV:INO" in decimal?  The bad line if not. */
static int
runselect_check_files(const char *files, char *bad, size_t badlen)
{
	const char	*p = files, *nl;
	unsigned long long dev, ino;
	char		 tail;
	char		 line[64];
	size_t		 n;

	for (; *p != '\0'; p = nl != NULL ? nl + 1 : p + n) {
		nl = strchr(p, '\n');
		n = nl != NULL ? (size_t)(nl - p) : strlen(p);
		if (n == 0)
			continue;
		snprintf(line, sizeof(line), "%.*s", (int)n, p);
		if (n >= sizeof(line) || sscanf(line, "%llu:%llu%c", &dev,
		    &ino, &tail) != 2) {
			snprintf(bad, badlen, "%.*s", (int)n, p);
			return (-1);
		}
	}
	return (0);
}

/* Take the rules from the environment's strings (NULL or "": none). */
int
runselect_init(struct runselect *rs, const char *names, const char *excludes,
    const char *files, char *bad, size_t badlen)
{
	memset(rs, 0, sizeof(*rs));
	if (files != NULL && *files != '\0' &&
	    runselect_check_files(files, bad, badlen) != 0)
		return (-1);
	rs->names = runselect_dup(names);
	rs->excludes = runselect_dup(excludes);
	rs->files = runselect_dup(files);
	return (0);
}

int
runselect_active(const struct runselect *rs)
{
	return (rs->names != NULL || rs->excludes != NULL || rs->files != NULL);
}

/* Does name match a line of patterns? */
static int
runselect_any(const char *patterns, const char *name)
{
	const char	*p = patterns, *nl;
	char		 pat[PATH_MAX];
	size_t		 n;

	for (; *p != '\0'; p = nl != NULL ? nl + 1 : p + n) {
		nl = strchr(p, '\n');
		n = nl != NULL ? (size_t)(nl - p) : strlen(p);
		if (n == 0 || n >= sizeof(pat))
			continue;
		memcpy(pat, p, n);
		pat[n] = '\0';
		if (fnmatch(pat, name, 0) == 0)
			return (1);
	}
	return (0);
}

static int
runselect_has_file(const char *files, dev_t dev, ino_t ino)
{
	const char		*p = files, *nl;
	unsigned long long	 d, i;
	size_t			 n;

	for (; *p != '\0'; p = nl != NULL ? nl + 1 : p + n) {
		nl = strchr(p, '\n');
		n = nl != NULL ? (size_t)(nl - p) : strlen(p);
		if (n != 0 && sscanf(p, "%llu:%llu", &d, &i) == 2 &&
		    d == (unsigned long long)dev && i == (unsigned long long)ino)
			return (1);
	}
	return (0);
}

/*
 * 1 if a mapping of the file (its name, device and inode) is to be
 * registered, else 0 with the reason in *why.  An exclusion wins; with
 * names or files to take, the file must be one of them.
 */
int
runselect_match(const struct runselect *rs, const char *name, dev_t dev,
    ino_t ino, const char **why)
{
	if (rs->excludes != NULL && runselect_any(rs->excludes, name)) {
		*why = "its name matches an exclusion (-x)";
		return (0);
	}
	if (rs->names == NULL && rs->files == NULL)
		return (1);
	if (rs->names != NULL && runselect_any(rs->names, name))
		return (1);
	if (rs->files != NULL && runselect_has_file(rs->files, dev, ino))
		return (1);
	*why = rs->files == NULL ? "its name matches no -n pattern" :
	    rs->names == NULL ? "it is not the file of a -F fd" :
	    "it matches no -n pattern and is no -F file";
	return (0);
}

/* The name of the file open on fd, as runselect_match takes it. */
const char *
runselect_fd_name(int fd, char *buf, size_t len)
{
	char	path[64];
	ssize_t	n;
	size_t	dl = strlen(RUNSELECT_DELETED);

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (len == 0)
		return ("");
	if ((n = readlink(path, buf, len - 1)) < 0)
		n = 0;
	buf[n] = '\0';
	if ((size_t)n > dl && strcmp(buf + n - dl, RUNSELECT_DELETED) == 0)
		buf[n - dl] = '\0';
	return (buf);
}

/* The "DEV:INO" line for the file open on fd; -1 (errno) if none. */
int
runselect_file_line(int fd, char *buf, size_t len)
{
	struct stat	sb;

	if (fstat(fd, &sb) == -1)
		return (-1);
	snprintf(buf, len, "%llu:%llu", (unsigned long long)sb.st_dev,
	    (unsigned long long)sb.st_ino);
	return (0);
}
