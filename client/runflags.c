/*
 * runflags.c - region flags by name, one list for hpz-run (which checks
 * what it is given) and the preload library (which applies it).
 */
#include <stdio.h>
#include <string.h>

#include "hpz.h"
#include "runflags.h"

static const struct {
	const char	*name;
	unsigned int	 flag;
} runflags[] = {
	{ "discard",	HPZ_DISCARD },
	{ "ahead",	HPZ_AHEAD_ONFAULT },
	{ "onfault",	HPZ_AHEAD_ONFAULT },
	{ "eager",	HPZ_AHEAD_EAGER },
	{ "premap",	HPZ_PREMAP },
	{ "nopremap",	HPZ_NO_PREMAP },
	{ "noscrub",	HPZ_NO_SCRUB },
	{ "nopool",	RUNFLAG_NOPOOL },
	{ "none",	0 },
};
#define RUNFLAGS_N	(sizeof(runflags) / sizeof(runflags[0]))

/* "discard,premap": the flag bits, or -1 naming the bad word in bad. */
int
runflags_parse(const char *s, unsigned int *out, char *bad, size_t badlen)
{
	const char	*p = s, *q;
	unsigned int	 flags = 0;
	size_t		 n, i;

	while (*p != '\0') {
		q = strchr(p, ',');
		n = q != NULL ? (size_t)(q - p) : strlen(p);
		for (i = 0; i < RUNFLAGS_N; i++)
			if (strlen(runflags[i].name) == n &&
			    strncmp(runflags[i].name, p, n) == 0)
				break;
		if (n != 0 && i == RUNFLAGS_N) {
			snprintf(bad, badlen, "%.*s", (int)n, p);
			return (-1);
		}
		if (n != 0)
			flags |= runflags[i].flag;
		p += n;
		if (*p == ',')
			p++;
	}
	*out = flags;
	return (0);
}

/* Flags spelled back ("discard,premap" or "none"). */
const char *
runflags_text(unsigned int flags, char *buf, size_t len)
{
	unsigned int	seen = 0;
	size_t		i, off = 0;

	buf[0] = '\0';
	for (i = 0; i < RUNFLAGS_N && off < len; i++) {
		if (runflags[i].flag == 0 || (flags & runflags[i].flag) == 0 ||
		    (seen & runflags[i].flag) != 0)
			continue;
		seen |= runflags[i].flag;
		off += (size_t)snprintf(buf + off, len - off, "%s%s",
		    off != 0 ? "," : "", runflags[i].name);
	}
	if (buf[0] == '\0')
		snprintf(buf, len, "none");
	return (buf);
}

/* Every name, for an error message. */
const char *
runflags_valid(char *buf, size_t len)
{
	size_t	i, off = 0;

	buf[0] = '\0';
	for (i = 0; i < RUNFLAGS_N && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s",
		    i != 0 ? ", " : "", runflags[i].name);
	return (buf);
}
