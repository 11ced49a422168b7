/*
 * log.c - logging to stderr with syslog priority prefixes, so that the
 * journal files each line at the right level.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static int	log_debug_on;

void
log_init(int debug)
{
	log_debug_on = debug;
}

/* One line, whole, with prefix and optional errno text. */
static void __attribute__((format(printf, 3, 0)))
log_vwrite(const char *prefix, int error, const char *fmt, va_list ap)
{
	char	buf[1024];
	int	n;

	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	if (n < 0)
		return;
	if (error != 0)
		fprintf(stderr, "%s%s: %s\n", prefix, buf, strerror(error));
	else
		fprintf(stderr, "%s%s\n", prefix, buf);
}

void
log_warn(const char *fmt, ...)
{
	va_list	ap;
	int	saved = errno;

	va_start(ap, fmt);
	log_vwrite("<4>", saved, fmt, ap);
	va_end(ap);
	errno = saved;
}

void
log_warnx(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	log_vwrite("<4>", 0, fmt, ap);
	va_end(ap);
}

void
log_info(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	log_vwrite("<6>", 0, fmt, ap);
	va_end(ap);
}

void
log_debug(const char *fmt, ...)
{
	va_list	ap;

	if (!log_debug_on)
		return;
	va_start(ap, fmt);
	log_vwrite("<7>", 0, fmt, ap);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	va_list	ap;
	int	saved = errno;

	va_start(ap, fmt);
	log_vwrite("<2>fatal: ", saved, fmt, ap);
	va_end(ap);
	abort();
}

void
fatalx(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	log_vwrite("<2>fatal: ", 0, fmt, ap);
	va_end(ap);
	abort();
}
