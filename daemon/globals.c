/*
 * globals.c - the daemon's state that every file reads: the event loop
 * and the time it started.  hpzerod.c sets them up; here, not there, so
 * that a program linking libhpzd.a without hpzerod.c's main() (the unit
 * tests, the fuzzer) gets them too.  And how a helper thread that must
 * take no signal is started.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "globals.h"
#include "log.h"

struct event_base	*hpzd_base;
uint64_t		 hpzd_start_ns;

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
