/*
 * globals.c - the daemon's state that every file reads: the event loop
 * and the time it started.  hpzerod.c sets them up; here, not there, so
 * that a program linking libhpzd.a without hpzerod.c's main() (the unit
 * tests, the fuzzer) gets them too.
 */
#include <stdint.h>

#include "hpzerod.h"

struct event_base	*hpzd_base;
uint64_t		 hpzd_start_ns;
