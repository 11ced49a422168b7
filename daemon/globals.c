/*
 * globals.c - the daemon's state that every file reads: the event loop
 * and the time it started.  hpzerod.c sets them up; here, not there, so
 * that a program linking libhpzd.a without hpzerod.c's main() (the unit
 * tests, the fuzzer) gets them too.  And how a helper thread that must
 * take no signal is started, and how any thread asks the main thread for
 * its tending pass (a callback registered from above: region.c's).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include <event2/event.h>

#include "globals.h"
#include "log.h"

struct event_base	*hpzd_base;
uint64_t		 hpzd_start_ns;
/*
 * Our threads awake now (cost.c: the CPUs others use are the runnable
 * threads less these): workers not asleep (at work or spinning), scrub,
 * pool fillers.  Each counts itself in while awake.
 */
atomic_int		 hpzd_busy;

/* Wakes the main thread for what only it may do (hpzd_kick). */
static int		 hpzd_kick_fd = -1;
static struct event	*hpzd_kick_ev;
static void		(*hpzd_kick_tend)(void);

/*
 * Start a thread named name with every signal blocked (the loop's
 * handlers take them, on the main thread): 0, or a negative errno, logged.
 */
int
hpzd_thread_start(pthread_t *t, void *(*fn)(void *), const char *name)
{
	sigset_t	all, old;
	int		error;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	error = pthread_create(t, NULL, fn, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (error != 0) {
		log_warnx("%s: pthread_create: %s", name, strerror(error));
		return (-error);
	}
	pthread_setname_np(*t, name);
	return (0);
}

static void
hpzd_kick_cb(int fd, short events, void *arg)
{
	uint64_t	v;

	if (read(hpzd_kick_fd, &v, sizeof(v)) == -1 && errno != EAGAIN)
		log_warn("uffd: read eventfd");
	hpzd_kick_tend();
}

/*
 * After each hpzd_kick the main thread calls tend (set up once, on the
 * main thread, before anything may kick).
 */
void
hpzd_kick_init(void (*tend)(void))
{
	if (hpzd_kick_ev != NULL)
		return;
	hpzd_kick_tend = tend;
	if ((hpzd_kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1)
		fatal("eventfd");
	hpzd_kick_ev = event_new(hpzd_base, hpzd_kick_fd,
	    EV_READ | EV_PERSIST, hpzd_kick_cb, NULL);
	if (hpzd_kick_ev == NULL || event_add(hpzd_kick_ev, NULL) == -1)
		fatalx("cannot watch the uffd events");
}

/* Ask the main thread for its tending pass (any thread). */
void
hpzd_kick(void)
{
	uint64_t	one = 1;

	if (hpzd_kick_fd >= 0 && write(hpzd_kick_fd, &one, sizeof(one)) ==
	    -1 && errno != EAGAIN)
		log_warn("uffd: wake the main thread");
}
