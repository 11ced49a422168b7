/*
 * mappers.c - does another process map part of a file?  Garbage (pages
 * after HPZ_DISCARD or hpz_reset, until cleared) is guarded by a uffd in
 * the registering process only: another process that maps the same pages
 * reads the old bytes.  This looks through /proc/PID/maps for a mapping of
 * the same file (device and inode) whose file range overlaps ours.  It
 * sees what this process may read: the processes of its own uid, or all
 * of them for root; a mapping made later, or an fd waiting in a socket,
 * it cannot see.  Built into libhpz and the preload library; the look
 * itself reads with read(2) into the stack and allocates nothing.
 *
 * A read of /proc/PID/maps waits for that process's mmap_lock, which the
 * process may hold as long as it likes (an mprotect walk of a large
 * populated mapping, with more queued behind it).  So the look runs on a
 * thread of its own, and the caller waits for it only while it makes
 * progress: a process whose map gives nothing for MAPPERS_STALL_MS is
 * passed over (the thread is left to finish when that process lets go,
 * and later looks skip that process meanwhile), and a new thread goes on
 * with the processes after it.  The caller waits at most MAPPERS_BUDGET_MS
 * for such stalls in all; the processes left then are not looked at.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>

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

/* A look that makes no progress for this long waits on a process's lock. */
#define MAPPERS_STALL_MS	200
/* How long in all a caller waits on such processes before it stops looking. */
#define MAPPERS_BUDGET_MS	1000
/* Looks left waiting on a process (each a sleeping thread) at most. */
#define MAPPERS_LEFT_MAX	8

/*
 * One look, shared by the caller and the thread that looks.  The caller
 * may leave before the thread is done (a stall): whichever of the two
 * comes last frees it.
 */
struct mappers_look {
	struct stat	 sb;
	uint64_t	 off, len;
	pid_t		 self;
	pid_t		 after;		/* look at the pids above this only */
	_Atomic pid_t	 at;		/* the pid being looked at now */
	atomic_uint	 progress;	/* bumped at every read */
	pid_t		 found;		/* the answer, once done */
	int		 error;		/* errno, or 0 */
	atomic_int	 done;
	atomic_int	 refs;
	pthread_mutex_t	 lock;
	pthread_cond_t	 cond;
	int		 slot;		/* in mappers_left, once left */
};

/* The pids that looks left behind still wait on (0: a free slot). */
static _Atomic pid_t	mappers_left[MAPPERS_LEFT_MAX];

/* A child of fork has none of the threads left waiting: nothing is left. */
static void
mappers_forked(void)
{
	int	i;

	for (i = 0; i < MAPPERS_LEFT_MAX; i++)
		atomic_store(&mappers_left[i], 0);
}

static pthread_once_t	mappers_once_ctl = PTHREAD_ONCE_INIT;

static void
mappers_once(void)
{
	(void)pthread_atfork(NULL, NULL, mappers_forked);
}

/* Is a look we left still waiting on pid?  Then do not wait on it again. */
static int
mappers_is_left(pid_t pid)
{
	int	i;

	for (i = 0; i < MAPPERS_LEFT_MAX; i++)
		if (atomic_load(&mappers_left[i]) == pid)
			return (1);
	return (0);
}

/* Does pid map [off, off+len) of the file?  1 yes, 0 no or unreadable. */
static int
mappers_pid(pid_t pid, const struct stat *sb, uint64_t off, uint64_t len,
    atomic_uint *progress)
{
	char	path[64], buf[4096], line[512];
	size_t	ll = 0;
	ssize_t	n, i;
	int	fd, found = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (0);
	while (!found && (n = read(fd, buf, sizeof(buf))) > 0) {
		atomic_fetch_add(progress, 1);
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
 * The look, on its own thread: the first process above lk->after, other
 * than the caller's and those a look left behind waits on, that maps part
 * of the range, in /proc's order (rising pids).
 */
static void
mappers_scan(struct mappers_look *lk)
{
	struct dirent64	*e;
	char		 buf[8192] __attribute__((aligned(8))), *end;
	pid_t		 pid, found = 0;
	long		 n, i, v;
	int		 d;

	if ((d = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		lk->error = errno;
		return;
	}
	while (found == 0 &&
	    (n = syscall(SYS_getdents64, d, buf, sizeof(buf))) > 0) {
		atomic_fetch_add(&lk->progress, 1);
		for (i = 0; i < n && found == 0; i += e->d_reclen) {
			e = (struct dirent64 *)(buf + i);
			if (!isdigit((unsigned char)e->d_name[0]))
				continue;
			errno = 0;
			v = strtol(e->d_name, &end, 10);
			if (*end != '\0' || errno != 0 || v <= 0)
				continue;
			pid = (pid_t)v;
			if (pid <= lk->after || pid == lk->self ||
			    mappers_is_left(pid))
				continue;
			atomic_store(&lk->at, pid);
			if (mappers_pid(pid, &lk->sb, lk->off, lk->len,
			    &lk->progress))
				found = pid;
		}
	}
	close(d);
	lk->found = found;
}

/* Drop one hold on a look: the last frees it. */
static void
mappers_put(struct mappers_look *lk)
{
	if (atomic_fetch_sub(&lk->refs, 1) != 1)
		return;
	pthread_mutex_destroy(&lk->lock);
	pthread_cond_destroy(&lk->cond);
	free(lk);
}

static void *
mappers_main(void *arg)
{
	struct mappers_look	*lk = arg;

	mappers_scan(lk);
	pthread_mutex_lock(&lk->lock);
	atomic_store(&lk->done, 1);
	pthread_cond_signal(&lk->cond);
	pthread_mutex_unlock(&lk->lock);
	/* Left behind: the process it waited on is free to be looked at. */
	if (lk->slot >= 0)
		atomic_store(&mappers_left[lk->slot], 0);
	mappers_put(lk);
	return (NULL);
}

static uint64_t
mappers_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
}

/*
 * Start a look at the pids above after, on a thread of its own; NULL if
 * no thread could be made (the caller then looks itself).
 */
static struct mappers_look *
mappers_start(const struct stat *sb, uint64_t off, uint64_t len, pid_t after)
{
	struct mappers_look	*lk;
	pthread_attr_t		 attr;
	pthread_t		 th;
	sigset_t		 all, old;
	int			 error;

	if ((lk = calloc(1, sizeof(*lk))) == NULL)
		return (NULL);
	lk->sb = *sb;
	lk->off = off;
	lk->len = len;
	lk->self = getpid();
	lk->after = after;
	lk->slot = -1;
	atomic_store(&lk->refs, 2);
	pthread_mutex_init(&lk->lock, NULL);
	pthread_cond_init(&lk->cond, NULL);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	/* The program's signals are for its own threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	error = pthread_create(&th, &attr, mappers_main, lk);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (error != 0) {
		pthread_mutex_destroy(&lk->lock);
		pthread_cond_destroy(&lk->cond);
		free(lk);
		return (NULL);
	}
	return (lk);
}

/*
 * Wait for lk while it makes progress.  1 done; 0 stalled on a process
 * for MAPPERS_STALL_MS, or past the deadline.
 */
static int
mappers_wait(struct mappers_look *lk, uint64_t deadline)
{
	struct timespec	ts;
	uint64_t	now, since = mappers_now_ms();
	unsigned int	seen = atomic_load(&lk->progress);

	pthread_mutex_lock(&lk->lock);
	while (!atomic_load(&lk->done)) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 20 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&lk->cond, &lk->lock, &ts);
		if (atomic_load(&lk->done))
			break;
		now = mappers_now_ms();
		if (atomic_load(&lk->progress) != seen) {
			seen = atomic_load(&lk->progress);
			since = now;
		}
		if (now - since >= MAPPERS_STALL_MS || now >= deadline) {
			pthread_mutex_unlock(&lk->lock);
			return (0);
		}
	}
	pthread_mutex_unlock(&lk->lock);
	return (1);
}

/*
 * Leave lk waiting on the process it is stuck on; later looks skip that
 * process while it waits.  0, or -1 when MAPPERS_LEFT_MAX looks wait
 * already (the caller stops looking).
 */
static int
mappers_leave(struct mappers_look *lk)
{
	pid_t	zero;
	int	i;

	for (i = 0; i < MAPPERS_LEFT_MAX; i++) {
		zero = 0;
		if (atomic_compare_exchange_strong(&mappers_left[i], &zero,
		    atomic_load(&lk->at)))
			break;
	}
	pthread_mutex_lock(&lk->lock);
	if (atomic_load(&lk->done)) {
		/* It finished meanwhile: nothing waits. */
		if (i < MAPPERS_LEFT_MAX)
			atomic_store(&mappers_left[i], 0);
		i = 0;
	} else
		lk->slot = i < MAPPERS_LEFT_MAX ? i : -1;
	pthread_mutex_unlock(&lk->lock);
	mappers_put(lk);
	return (i < MAPPERS_LEFT_MAX ? 0 : -1);
}

/*
 * The first process other than this one that maps part of [off, off+len)
 * of the file open on fd; 0 if none is seen, -1 (errno) if we cannot look.
 * Processes whose maps cannot be read in time are passed over (above).
 */
pid_t
mappers_other(int fd, uint64_t off, uint64_t len)
{
	struct mappers_look	*lk;
	struct stat		 sb;
	uint64_t		 deadline;
	pid_t			 found, after = 0;
	int			 error;

	if (fstat(fd, &sb) == -1)
		return (-1);
	(void)pthread_once(&mappers_once_ctl, mappers_once);
	deadline = mappers_now_ms() + MAPPERS_BUDGET_MS;
	for (;;) {
		if ((lk = mappers_start(&sb, off, len, after)) == NULL) {
			/* No thread: look here, and wait if we must. */
			struct mappers_look	here;

			memset(&here, 0, sizeof(here));
			here.sb = sb;
			here.off = off;
			here.len = len;
			here.self = getpid();
			here.after = after;
			mappers_scan(&here);
			errno = here.error;
			return (here.error != 0 ? -1 : here.found);
		}
		if (mappers_wait(lk, deadline)) {
			found = lk->found;
			error = lk->error;
			mappers_put(lk);
			errno = error;
			return (error != 0 ? -1 : found);
		}
		/* Stuck on one process: go on after it, while time is left. */
		after = atomic_load(&lk->at);
		if (mappers_leave(lk) != 0 || mappers_now_ms() >= deadline)
			return (0);
	}
}
