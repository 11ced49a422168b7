/*
 * log.h - the daemon's log, in one shape (log.c).
 */
#ifndef HPZD_LOG_H
#define HPZD_LOG_H

#include <stddef.h>


void		 log_init(int debug);
void		 log_escape(char *, size_t, const char *);
void		 log_warn(const char *, ...) __attribute__((format(printf, 1, 2)));
void		 log_warnx(const char *, ...) __attribute__((format(printf, 1, 2)));
void		 log_info(const char *, ...) __attribute__((format(printf, 1, 2)));
void		 log_debug(const char *, ...) __attribute__((format(printf, 1, 2)));
void		 fatal(const char *, ...)
		    __attribute__((format(printf, 1, 2), noreturn));
void		 fatalx(const char *, ...)
		    __attribute__((format(printf, 1, 2), noreturn));

#endif /* HPZD_LOG_H */
