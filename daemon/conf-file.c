/*
 * conf-file.c - hpzerod.conf: an INI file read with libinih, each key set
 * through conf.c's table, with the file's line in every error.  Pure, as
 * conf.c: the caller reports the error and applies what was read.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <ini.h>

#include "conf.h"

/* What one load has read so far; committed to the caller only whole. */
struct conf_parse {
	FILE		*f;
	struct conf	 c;		/* the caller's, with the file on top */
	int		 line;		/* the line inih is on */
	int		 read_errno;	/* the stream failed, 0: it did not */
	int		 errline;	/* of our first error, 0: none */
	char		 reason[256];
	int		 ahead_line;	/* last ahead_min or ahead_max */
};

static int	conf_fail(struct conf_parse *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));

/* Keep the first error and its line; inih only learns that the line is bad. */
static int
conf_fail(struct conf_parse *p, const char *fmt, ...)
{
	va_list	ap;

	if (p->errline != 0)
		return (0);
	p->errline = p->line;
	va_start(ap, fmt);
	vsnprintf(p->reason, sizeof(p->reason), fmt, ap);
	va_end(ap);
	return (0);
}

/* inih's handler: one key = value line of the file. */
static int
conf_handler(void *arg, const char *section, const char *name,
    const char *value)
{
	struct conf_parse	*p = arg;
	const struct conf_key	*k;
	char			 why[sizeof(p->reason)];
	size_t			 i;
	int			 known = 0;

	if (p->errline != 0)
		return (0);
	/* Only builds of inih with other options call with NULLs. */
	if (name == NULL)
		return (1);		/* a new section */
	if (value == NULL)
		return (conf_fail(p, "key '%s' has no value", name));
	if ((k = conf_key_find(section, name)) != NULL) {
		if (strcmp(name, "ahead_min") == 0 ||
		    strcmp(name, "ahead_max") == 0)
			p->ahead_line = p->line;
		if (conf_set(&p->c, k, value, 0, why, sizeof(why)) == -1)
			return (conf_fail(p, "%s", why));
		return (1);
	}
	for (i = 0; (k = conf_key_at(i)) != NULL; i++)
		if (strcmp(k->section, section) == 0)
			known = 1;
	if (*section == '\0')
		return (conf_fail(p, "key '%s' is outside any section", name));
	if (!known)
		return (conf_fail(p, "key '%s' is in unknown section [%s]",
		    name, section));
	return (conf_fail(p, "unknown key '%s' in [%s]", name, section));
}

/*
 * inih's reader: fgets counting lines, so that our errors carry the line
 * inih is on.  It drops leading blanks, since inih would take an indented
 * line for the continuation of the previous value, refuses a line longer
 * than inih's buffer (but a comment), which inih would split in two, and
 * stops after the first error.
 */
static char *
conf_read_line(char *str, int num, void *arg)
{
	struct conf_parse	*p = arg;
	size_t			 len, skip;
	int			 ch;

	if (p->errline != 0)
		return (NULL);
	if (fgets(str, num, p->f) == NULL) {
		if (ferror(p->f))
			p->read_errno = errno != 0 ? errno : EIO;
		return (NULL);
	}
	p->line++;
	len = strlen(str);
	skip = strspn(str, " \t");
	if ((len == 0 || str[len - 1] != '\n') && (ch = getc(p->f)) != EOF) {
		if (len + 1 != (size_t)num) {
			conf_fail(p, "line holds a NUL byte");
			return (NULL);
		}
		if (str[skip] != ';' && str[skip] != '#') {
			conf_fail(p, "line longer than %d characters", num - 3);
			return (NULL);
		}
		/* A long comment is still a comment: drop the rest. */
		while (ch != '\n' && ch != EOF)
			ch = getc(p->f);
	}
	memmove(str, str + skip, len - skip + 1);
	return (str);
}

/* Read path on top of *c; *c changes only if the whole file is good. */
int
conf_load(const char *path, struct conf *c, char *why, size_t whylen)
{
	struct conf_parse	 p;
	char			 min[32], max[32];
	int			 r, error;

	memset(&p, 0, sizeof(p));
	p.c = *c;
	if ((p.f = fopen(path, "re")) == NULL) {
		error = errno;
		snprintf(why, whylen, "cannot open %s: %s", path,
		    strerror(error));
		return (-error);
	}
	r = ini_parse_stream(conf_read_line, &p, conf_handler, &p);
	fclose(p.f);
	if (p.read_errno != 0) {
		snprintf(why, whylen, "cannot read %s: %s", path,
		    strerror(p.read_errno));
		return (-p.read_errno);
	}
	if (r == -2) {
		snprintf(why, whylen, "%s: out of memory", path);
		return (-ENOMEM);
	}
	/* inih goes on after a line it cannot parse: an earlier line wins. */
	if (r > 0 && (p.errline == 0 || r < p.errline)) {
		p.errline = r;
		snprintf(p.reason, sizeof(p.reason), "syntax error: expected "
		    "'[section]', 'key = value' or a comment");
	}
	if (p.errline != 0) {
		snprintf(why, whylen, "%s:%d: %s", path, p.errline, p.reason);
		return (-EINVAL);
	}
	if (p.c.ahead_min > p.c.ahead_max) {
		conf_format(&p.c, conf_key_find("background", "ahead_min"), min,
		    sizeof(min));
		conf_format(&p.c, conf_key_find("background", "ahead_max"), max,
		    sizeof(max));
		if (p.ahead_line != 0)
			snprintf(why, whylen, "%s:%d: ahead_min (%s) is larger "
			    "than ahead_max (%s)", path, p.ahead_line, min,
			    max);
		else
			snprintf(why, whylen, "%s: ahead_min (%s) is larger "
			    "than ahead_max (%s)", path, min, max);
		return (-EINVAL);
	}
	*c = p.c;
	return (0);
}
