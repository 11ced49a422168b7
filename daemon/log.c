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

/*
 * Copy src to dst (len bytes), each control byte and backslash written
 * as \xNN: a string a client gave (a pool request's name, a path) can
 * then neither end the line nor start one of its own with a priority
 * prefix ("\n<0>...") that the journal would file as an emergency.
 */
void
log_escape(char *dst, size_t len, const char *src)
{
	static const char	hex[] = "0123456789abcdef";
	size_t			o = 0;
	unsigned char		c;

	if (len == 0)
		return;
	for (; (c = (unsigned char)*src) != '\0'; src++) {
		if (c >= 0x20 && c != 0x7f && c != '\\') {
			if (o + 1 >= len)
				break;
			dst[o++] = (char)c;
			continue;
		}
		if (o + 4 >= len)
			break;
		dst[o++] = '\\';
		dst[o++] = 'x';
		dst[o++] = hex[c >> 4];
		dst[o++] = hex[c & 15];
	}
	dst[o] = '\0';
}

/* One line, whole, with prefix and optional errno text. */
static void __attribute__((format(printf, 3, 0)))
log_vwrite(const char *prefix, int error, const char *fmt, va_list ap)
{
	char	buf[1024], line[1024];
	int	n;

	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	if (n < 0)
		return;
	log_escape(line, sizeof(line), buf);
	if (error != 0)
		fprintf(stderr, "%s%s: %s\n", prefix, line, strerror(error));
	else
		fprintf(stderr, "%s%s\n", prefix, line);
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
