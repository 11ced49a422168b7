/*
 * globals.h - what every thread of the daemon shares (globals.c).
 */
#ifndef HPZD_GLOBALS_H
#define HPZD_GLOBALS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

struct event_base;

#define HPZD_WORKERS_MAX	256
#define HPZD_REGIONS_PER_CLIENT	1024
#define HPZD_CLIENTS_MAX	1024

/* globals.c: set up by hpzerod.c */
extern struct event_base	*hpzd_base;
int		 hpzd_thread_start(pthread_t *, void *(*)(void *),
		    const char *name);
extern uint64_t			 hpzd_start_ns;
extern atomic_int		 hpzd_busy;
void		 hpzd_kick_init(void (*tend)(void));
void		 hpzd_kick(void);

#endif /* HPZD_GLOBALS_H */
