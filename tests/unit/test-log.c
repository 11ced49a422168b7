/*
 * test-log.c - daemon/log.c: what a client gave cannot forge a log line.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "log.h"

/* Control bytes and backslashes come out as \xNN, the rest as it was. */
Test(log, escape_writes_control_bytes_as_hex)
{
	char	out[64];

	log_escape(out, sizeof(out), "vm\n<0>boom\t\\end");
	cr_assert_str_eq(out, "vm\\x0a<0>boom\\x09\\x5cend");
	log_escape(out, sizeof(out), "plain name");
	cr_assert_str_eq(out, "plain name");
}

/* A short buffer cuts at a whole character or escape, terminated. */
Test(log, escape_cuts_whole)
{
	char	out[6];

	log_escape(out, sizeof(out), "ab\ncd");
	cr_assert_str_eq(out, "ab");
	log_escape(out, sizeof(out), "abcdefgh");
	cr_assert_str_eq(out, "abcde");
}

/*
 * A pool request's name with "\n<0>..." in it (issue 31): the daemon's
 * line stays one line, and no line of the log starts with a priority the
 * name chose.
 */
Test(log, a_name_with_a_newline_stays_on_its_line)
{
	char	buf[512];
	ssize_t	n;
	int	p[2], saved;

	cr_assert_eq(pipe(p), 0);
	fflush(stderr);
	saved = dup(2);
	cr_assert_eq(dup2(p[1], 2), 2);
	log_info("pool: file 1 for '%s'", "vm\n<0>forged emergency");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(p[1]);
	n = read(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	cr_assert_gt(n, 0);
	buf[n] = '\0';
	cr_assert_eq(strchr(buf, '\n'), buf + n - 1, "more than one line: %s",
	    buf);
	cr_assert_null(strstr(buf, "\n<0>"), "a forged line: %s", buf);
	cr_assert_str_eq(buf, "<6>pool: file 1 for 'vm\\x0a<0>forged "
	    "emergency'\n");
}
