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
#include <stdint.h>
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

#include "hpz.h"
#include "hpz-protocol.h"
#include "hpz-state.h"

#include "cctx.h"
#include "fdstore.h"
#include "keep.h"
#include "log.h"
#include "prep.h"
#include "reap.h"
#include "region.h"

static const char	fdstore_kinds[FDSTORE_KINDS] = { 'u', 'f', 's', 'p' };
static int		fdstore_on;

static void	fdstore_close(int *fds);

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

/* A stored region being let go (prep.c does the walk). */
struct fdstore_rel {
	uint64_t	id;
	int		fds[FDSTORE_KINDS];
	uint64_t	npages;		/* from the sealed size */
	uint64_t	page_size;	/* the rest: one copy of the header */
	uint64_t	offset;
	uint64_t	addr;
	uint64_t	len;
	struct cctx	*ctx;		/* its uid's released regions' */
	struct cctx_job	job;		/* the punches, on that context */
};

/*
 * Check a stored state memfd before anything works on it: sealed against
 * shrinking and growing (so its size is the one we checked at register,
 * and our mapping cannot fault), and a header that agrees with that size.
 * 0 with the header's copy in rel, or -1 with why.
 */
static int
fdstore_check_state(int sfd, int fd, struct fdstore_rel *rel, char *why,
    size_t whylen)
{
	struct hpz_state_header	h;
	struct stat		sb, fb;
	int			seals;

	seals = fcntl(sfd, F_GET_SEALS);
	if (seals == -1 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) !=
	    (F_SEAL_SHRINK | F_SEAL_GROW)) {
		snprintf(why, whylen, "its state memfd is not sealed against "
		    "shrinking and growing");
		return (-1);
	}
	if (fstat(sfd, &sb) == -1 ||
	    (uint64_t)sb.st_size <= HPZ_STATE_PAGES_OFF) {
		snprintf(why, whylen, "its state memfd is too small");
		return (-1);
	}
	if (pread(sfd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    h.magic != HPZ_STATE_MAGIC || h.version != HPZ_STATE_VERSION) {
		snprintf(why, whylen, "its state memfd has no valid header");
		return (-1);
	}
	rel->npages = (uint64_t)sb.st_size - HPZ_STATE_PAGES_OFF;
	if (h.npages != rel->npages || !proto_page_size_ok(h.page_size) ||
	    h.len / h.page_size != rel->npages || h.len % h.page_size != 0 ||
	    h.offset % h.page_size != 0 || h.offset > INT64_MAX - h.len) {
		snprintf(why, whylen, "its state header (%llu pages of %llu "
		    "bytes, %llu bytes at %llu) does not match its sealed size "
		    "(%llu pages)", (unsigned long long)h.npages,
		    (unsigned long long)h.page_size,
		    (unsigned long long)h.len, (unsigned long long)h.offset,
		    (unsigned long long)rel->npages);
		return (-1);
	}
	/* Where its pages are: inside the file, or the header lies. */
	if (fstat(fd, &fb) == -1 || h.offset > (uint64_t)fb.st_size ||
	    h.len > (uint64_t)fb.st_size - h.offset) {
		snprintf(why, whylen, "its state header puts the range at "
		    "%llu, +%llu, outside its file",
		    (unsigned long long)h.offset, (unsigned long long)h.len);
		return (-1);
	}
	rel->page_size = h.page_size;
	rel->offset = h.offset;
	rel->addr = h.addr;
	rel->len = h.len;
	return (0);
}

/*
 * On the context of the uid that owns the state (not the prep thread,
 * which others need: a map of the file takes its inode lock, and whoever
 * still holds the file can hold that lock): under the server lock (never
 * waited for: a live holder serves the region itself), resolve what we
 * left busy and clear every garbage page in place (keep.c: the client
 * keeps its pages), going by the state's data extents, so that no one can
 * read the garbage; with none left, unregister the range.
 */
static void
fdstore_release_work(struct cctx_job *j)
{
	struct fdstore_rel	*rel = j->arg;
	_Atomic uint8_t		*st;
	void			*map, *pmap;
	size_t			 maplen = HPZ_STATE_SIZE(rel->npages);
	uint64_t		 lo, hi, i, left, holes, kept = 0;
	int			 lockfd;

	if ((lockfd = state_lock_server(rel->fds[2], 0)) < 0) {
		log_warnx("stored region %llu: its page state is held by "
		    "another server: left to it",
		    (unsigned long long)rel->id);
		return;
	}
	map = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED,
	    rel->fds[2], 0);
	if (map == MAP_FAILED) {
		log_warn("stored region %llu: map its page state",
		    (unsigned long long)rel->id);
		close(lockfd);
		return;
	}
	/* No reservation of our own: the client's mapping holds it. */
	pmap = mmap(NULL, rel->len, PROT_READ | PROT_WRITE, MAP_SHARED |
	    MAP_NORESERVE, rel->fds[1], (off_t)rel->offset);
	if (pmap == MAP_FAILED)
		log_warn("stored region %llu: map its file (its garbage is "
		    "punched instead)", (unsigned long long)rel->id);
	st = (_Atomic uint8_t *)((char *)map + HPZ_STATE_PAGES_OFF);
	for (i = 0; prep_state_extent(rel->fds[2], rel->npages, i, &lo, &hi);
	    i = hi) {
		state_recover(st + lo, hi - lo);
		if (pmap == MAP_FAILED)	/* the last resort: punched */
			(void)state_drop_garbage(st + lo, hi - lo, rel->fds[1],
			    rel->offset + lo * rel->page_size, rel->page_size,
			    NULL, NULL, &left);
		else
			(void)keep_garbage(st + lo, hi - lo, (char *)pmap +
			    lo * rel->page_size, rel->page_size, NULL, &left,
			    &holes);
		kept += left;
	}
	if (pmap != MAP_FAILED)
		munmap(pmap, rel->len);
	/*
	 * With no garbage left the kernel may serve the range.  A page we
	 * could not clear keeps the range registered: libhpz serves it
	 * (clearing that page) once it sees no daemon.
	 */
	if (kept != 0)
		log_warnx("stored region %llu: garbage pages could not be "
		    "cleared: the range stays registered",
		    (unsigned long long)rel->id);
	else if (rel->fds[0] >= 0) {
		struct uffdio_range	range = { rel->addr, rel->len };

		(void)ioctl(rel->fds[0], UFFDIO_UNREGISTER, &range);
	}
	munmap(map, maplen);
	close(lockfd);
}

/* Back on the main thread: the client's fds go to the reaper. */
static void
fdstore_release_done(struct cctx_job *j)
{
	struct fdstore_rel	*rel = j->arg;

	fdstore_close(rel->fds);
	cctx_put(rel->ctx);
	free(rel);
}

/*
 * A stored region we cannot serve again (its client exited, or the checks
 * fail): out of the store first, so that whatever happens next cannot
 * bring it back on the next start; then, if its state can be trusted,
 * make sure no one can read its garbage (off the loop, after READY=1),
 * and let everything go.  The client, if alive, gets its range back from
 * the kernel.
 */
void
fdstore_release(uint64_t id, int *fds, const char *why)
{
	struct fdstore_rel	*rel;
	struct stat		 sb;
	char			 bad[HPZ_REPLY_TEXT];
	int			 i;

	fdstore_remove(id);
	if ((rel = calloc(1, sizeof(*rel))) == NULL)
		fatal("calloc");
	rel->id = id;
	for (i = 0; i < FDSTORE_KINDS; i++) {
		rel->fds[i] = fds[i];
		fds[i] = -1;
	}
	if (rel->fds[1] < 0 || rel->fds[2] < 0) {
		log_warnx("stored region %llu: not taken back: %s; its fds "
		    "are closed", (unsigned long long)id, why);
		fdstore_close(rel->fds);
		free(rel);
		return;
	}
	if (fdstore_check_state(rel->fds[2], rel->fds[1], rel, bad,
	    sizeof(bad)) != 0) {
		log_warnx("stored region %llu: not taken back: %s; and %s: "
		    "dropped as it is, without its garbage being punched",
		    (unsigned long long)id, why, bad);
		fdstore_close(rel->fds);
		free(rel);
		return;
	}
	log_warnx("stored region %llu: not taken back: %s; its garbage "
	    "pages are dropped", (unsigned long long)id, why);
	/*
	 * Its client may be gone: the context is its uid's (pid 0 in the
	 * log and status), the owner of its state memfd.  No context (out
	 * of memory): the punches run here, as cctx_submit does without.
	 */
	rel->ctx = fstat(rel->fds[2], &sb) == 0 ? cctx_get(0, sb.st_uid) :
	    NULL;
	(void)cctx_submit(rel->ctx, &rel->job, fdstore_release_work,
	    fdstore_release_done, rel, "the punch of a stored region's "
	    "garbage (its client did not take it back)");
}

/* Close a stored region's fds, on the reaper: the client chose them. */
static void
fdstore_close(int *fds)
{
	int	i;

	for (i = 0; i < FDSTORE_KINDS; i++) {
		reap_close(fds[i]);
		fds[i] = -1;
	}
}

/*
 * Take one stored region back: what it needs is there, its client lives;
 * adopt makes a region of it as a register would (control-orphan.c).
 */
static void
fdstore_take(uint64_t id, int *fds, fdstore_adopt_fn adopt)
{
	struct hpz_state_header	 h;
	struct hpz_msg_register	 m;
	pid_t			 pid;

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
	adopt(id, pid, &m, fds);
}

/* The largest region id among the stored fds' names, 0: none. */
uint64_t
fdstore_max_id(int n, const int *fd, char **names)
{
	uint64_t	id, maxid = 0;
	int		i;

	for (i = 0; i < n; i++)
		if (fd[i] >= 0 && fdstore_parse_name(names[i], &id) >= 0 &&
		    id > maxid)
			maxid = id;
	return (maxid);
}

/*
 * Take back every region systemd handed us (fds from SD_LISTEN_FDS_START,
 * names from LISTEN_FDNAMES; the listening socket already taken out, its
 * slot set to -1), each through adopt.  The caller has reserved their ids
 * (fdstore_max_id).
 */
void
fdstore_retake(int n, const int *fd, char **names, fdstore_adopt_fn adopt)
{
	struct {
		uint64_t	id;
		int		fds[FDSTORE_KINDS];
	}		*g = NULL;
	size_t		 ng = 0, j;
	uint64_t	 id;
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
			reap_close(fd[i]);
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
			reap_close(g[j].fds[k]);	/* a duplicate name */
		g[j].fds[k] = fd[i];
	}
	for (j = 0; j < ng; j++)
		fdstore_take(g[j].id, g[j].fds, adopt);
	if (ng > 0)
		log_info("%zu region(s) came back from systemd's fd store",
		    ng);
	free(g);
}
