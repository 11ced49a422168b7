/*
 * window.h - plan_window's cases as a table, for the unit tests of the
 * planner (test-plan.c) and of the clear (test-clear.c): each case names
 * itself when it fails.
 */
#ifndef WINDOW_H
#define WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include <criterion/criterion.h>

#include "plan.h"

struct window_case {
	uint64_t	 page, fault, hot;	/* plan_window's arguments */
	uint64_t	 start, len;		/* what it must give */
	const char	*what;
};

static inline void
expect_windows(const struct window_case *c, size_t n)
{
	uint64_t	s, l;
	size_t		i;

	for (i = 0; i < n; i++) {
		s = l = 99;
		plan_window(c[i].page, c[i].fault, c[i].hot, &s, &l);
		cr_expect(s == c[i].start && l == c[i].len, "%s: window "
		    "%llu +%llu, wanted %llu +%llu", c[i].what,
		    (unsigned long long)s, (unsigned long long)l,
		    (unsigned long long)c[i].start,
		    (unsigned long long)c[i].len);
	}
}

#define EXPECT_WINDOWS(c)	expect_windows((c), sizeof(c) / sizeof((c)[0]))

#endif
