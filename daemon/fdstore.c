/*
 * fdstore.c - keep every region in systemd's fd store, so that a daemon
 * that dies (SIGKILL, abort, watchdog) and is started again takes its
 * regions back and serves on.
 *
 * Per region four descriptors go to the store, each named
 * "hpz-r<id>-<kind>": u (the userfaultfd, non-blocking as systemd wants),
 * f (the backing file), s (the page-state memfd, hpz-state.h) and p (a
 * pidfd of the client, to tell a departed client from a live one).  What
 * the region looks like is in the state memfd's header; everything in it
 * is checked again on the way back as if the client had just registered.
 * A region that goes away is removed from the store (FDSTOREREMOVE).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/userfaultfd.h>

#include <systemd/sd-daemon.h>

#include "hpzerod.h"

static const char	fdstore_kinds[FDSTORE_KINDS] = { 'u', 'f', 's', 'p' };
static int		fdstore_on;

static void	fdstore_drop(uint64_t id, int *fds);

/* Store regions when systemd gave us a notify socket (and not disabled). */
void
fdstore_init(int enable)
{
	fdstore_on = enable && getenv("NOTIFY_SOCKET") != NULL;
}

int
fdstore_enabled(void)
{
	return (fdstore_on);
}

/* A pidfd for pid, or -1. */
int
fdstore_pidfd(pid_t pid)
{
	if (pid <= 0)
		return (-1);
	return ((int)syscall(SYS_pidfd_open, pid, 0));
}

/* The pid a pidfd names, 0 once it exited, -1 if unknown. */
static pid_t
fdstore_pidfd_pid(int pidfd)
{
	char	 path[64], line[256];
	FILE	*f;
	long	 pid = -1;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	if ((f = fopen(path, "re")) == NULL)
		return (-1);
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "Pid: %ld", &pid) == 1)
			break;
	fclose(f);
	return (pid < 0 ? 0 : (pid_t)pid);
}

/* Put a region's descriptors in the store. */
void
fdstore_remember(struct region *r)
{
	char	msg[128];
	int	fds[FDSTORE_KINDS], i, rc;

	if (!fdstore_on || r->stored)
		return;
	fds[0] = r->uffd;
	fds[1] = r->fd;
	fds[2] = r->sfd;
	fds[3] = r->pidfd;
	for (i = 0; i < FDSTORE_KINDS; i++) {
		if (fds[i] < 0)
			continue;
		snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=hpz-r%llu-%c",
		    (unsigned long long)r->id, fdstore_kinds[i]);
		rc = sd_pid_notify_with_fds(0, 0, msg, &fds[i], 1);
		if (rc <= 0) {
			log_warnx("region %llu: cannot put fds in systemd's "
			    "store (%s): a crash would lose the region",
			    (unsigned long long)r->id, rc < 0 ?
			    strerror(-rc) : "no notify socket");
			break;
		}
	}
	r->stored = 1;
}

/* Take the descriptors stored under region id's names out of the store. */
static void
fdstore_remove(uint64_t id)
{
	char	msg[128];
	int	i;

	for (i = 0; i < FDSTORE_KINDS; i++) {
		snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=hpz-r%llu-%c",
		    (unsigned long long)id, fdstore_kinds[i]);
		(void)sd_notify(0, msg);
	}
}

/* Take a region's descriptors out of the store. */
void
fdstore_forget(struct region *r)
{
	if (!r->stored)
		return;
	fdstore_remove(r->id);
	r->stored = 0;
}

/* Parse "hpz-r<id>-<kind>"; the kind's index, or -1. */
int
fdstore_parse_name(const char *name, uint64_t *id)
{
	unsigned long long	 v;
	char			*end;
	int			 i;

	if (strncmp(name, "hpz-r", 5) != 0 || name[5] < '0' || name[5] > '9')
		return (-1);
	errno = 0;
	v = strtoull(name + 5, &end, 10);
	if (errno != 0 || v == 0 || end[0] != '-' || end[1] == '\0' ||
	    end[2] != '\0')
		return (-1);
	for (i = 0; i < FDSTORE_KINDS; i++)
		if (end[1] == fdstore_kinds[i]) {
			*id = v;
			return (i);
		}
	return (-1);
}

/*
 * A stored region we cannot serve again (its client exited, or the checks
 * fail): make sure no one can read its garbage, then let everything go.
 * The client, if alive, gets its range back from the kernel.
 */
static void
fdstore_release(uint64_t id, int *fds, const char *why)
{
	struct hpz_state_header	*h;
	_Atomic uint8_t		*st;
	struct stat		 sb;
	void			*map = MAP_FAILED;
	uint64_t		 left;
	int			 lockfd = -1;

	log_warnx("stored region %llu: not taken back: %s; its garbage pages "
	    "are dropped", (unsigned long long)id, why);
	if (fds[2] < 0 || fds[1] < 0 || fstat(fds[2], &sb) == -1 ||
	    (uint64_t)sb.st_size < HPZ_STATE_PAGES_OFF)
		goto out;
	map = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE,
	    MAP_SHARED, fds[2], 0);
	if (map == MAP_FAILED)
		goto out;
	h = map;
	if (h->magic != HPZ_STATE_MAGIC || h->npages >
	    (uint64_t)sb.st_size - HPZ_STATE_PAGES_OFF || h->page_size == 0)
		goto out;
	if ((lockfd = state_lock_server(fds[2], 500)) < 0)
		goto out;
	st = (_Atomic uint8_t *)((char *)map + HPZ_STATE_PAGES_OFF);
	state_recover(st, h->npages);
	(void)state_drop_garbage(st, h->npages, fds[1], h->offset,
	    h->page_size, NULL, NULL, &left);
	/*
	 * With no garbage left the kernel may serve the range.  A page we
	 * could not punch keeps the range registered: libhpz serves it
	 * (clearing that page) once it sees no daemon.
	 */
	if (left != 0)
		log_warnx("stored region %llu: %llu garbage pages could not be "
		    "punched: the range stays registered",
		    (unsigned long long)id, (unsigned long long)left);
	if (fds[0] >= 0 && h->len != 0 && left == 0) {
		struct uffdio_range	range = { h->addr, h->len };

		(void)ioctl(fds[0], UFFDIO_UNREGISTER, &range);
	}
out:
	if (map != MAP_FAILED)
		munmap(map, (size_t)sb.st_size);
	if (lockfd >= 0)
		close(lockfd);
	fdstore_drop(id, fds);
}

/* Close a stored region's fds and take them out of the store. */
static void
fdstore_drop(uint64_t id, int *fds)
{
	int	i;

	for (i = 0; i < FDSTORE_KINDS; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
	fdstore_remove(id);
}

/* Take one stored region back. */
static void
fdstore_take(uint64_t id, int *fds)
{
	struct hpz_state_header	 h;
	struct hpz_msg_register	 m;
	struct client		*c;
	struct region		*r;
	char			 why[HPZ_REPLY_TEXT];
	pid_t			 pid;
	int			 error;

	if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0) {
		fdstore_release(id, fds, "some of its fds are missing");
		return;
	}
	if (pread(fds[2], &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    h.magic != HPZ_STATE_MAGIC) {
		fdstore_release(id, fds, "its state memfd has no header");
		return;
	}
	pid = fds[3] >= 0 ? fdstore_pidfd_pid(fds[3]) : -1;
	if (pid <= 0) {
		fdstore_release(id, fds, pid == 0 ? "its client exited" :
		    "its client is unknown");
		return;
	}
	memset(&m, 0, sizeof(m));
	m.addr = h.addr;
	m.len = h.len;
	m.offset = h.offset;
	m.page_size = h.page_size;
	m.uffd_features = h.uffd_features;
	m.uffd_ioctls = h.uffd_ioctls;
	m.flags = h.flags & HPZ_REGION_FLAGS;
	if ((c = control_orphan(pid)) == NULL) {
		fdstore_release(id, fds, "cannot watch its client");
		return;
	}
	error = region_create(c, &m, fds[0], fds[1], fds[2], &r, why,
	    sizeof(why));
	if (error != 0) {
		control_orphan_check(c);
		fdstore_release(id, fds, why);
		return;
	}
	r->pidfd = fds[3];
	region_set_id(r, id);
	r->stored = 1;
	log_info("region %llu of pid %d taken back from systemd's fd store: "
	    "0x%llx +%llu MiB, %llu busy pages resolved, waiters woken",
	    (unsigned long long)id, (int)pid, (unsigned long long)r->addr,
	    (unsigned long long)(r->len >> 20),
	    (unsigned long long)r->recovered);
}

/*
 * Take back every region systemd handed us (fds from SD_LISTEN_FDS_START,
 * names from LISTEN_FDNAMES; the listening socket already taken out, its
 * slot set to -1).
 */
void
fdstore_retake(int n, const int *fd, char **names)
{
	struct {
		uint64_t	id;
		int		fds[FDSTORE_KINDS];
	}		*g = NULL;
	size_t		 ng = 0, j;
	uint64_t	 id, maxid = 0;
	int		 i, k;

	if (n <= 0)
		return;
	if ((g = calloc((size_t)n, sizeof(*g))) == NULL)
		fatal("calloc");
	for (i = 0; i < n; i++) {
		if (fd[i] < 0)
			continue;
		if ((k = fdstore_parse_name(names[i], &id)) < 0) {
			log_warnx("systemd passed fd %d named \"%s\": not ours, "
			    "closed", fd[i], names[i]);
			close(fd[i]);
			continue;
		}
		for (j = 0; j < ng && g[j].id != id; j++)
			;
		if (j == ng) {
			g[ng].id = id;
			for (k = 0; k < FDSTORE_KINDS; k++)
				g[ng].fds[k] = -1;
			ng++;
			k = fdstore_parse_name(names[i], &id);
		}
		if (g[j].fds[k] >= 0)
			close(g[j].fds[k]);	/* a duplicate name */
		g[j].fds[k] = fd[i];
		if (id > maxid)
			maxid = id;
	}
	region_reserve_ids(maxid);
	for (j = 0; j < ng; j++)
		fdstore_take(g[j].id, g[j].fds);
	if (ng > 0)
		log_info("%zu region(s) came back from systemd's fd store",
		    ng);
	free(g);
}
