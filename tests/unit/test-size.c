/*
 * test-size.c - unit tests of lib/size.c: the sizes people write
 * (size_parse, size_parse_max) and the three ways the client programs
 * print them back (size_format).
 */
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "size.h"

#define KiB	1024ULL
#define MiB	(1024ULL * KiB)
#define GiB	(1024ULL * MiB)
#define TiB	(1024ULL * GiB)

static void
expect_format(enum size_style style, uint64_t n, const char *want)
{
	char	buf[32];

	cr_expect_str_eq(size_format(style, n, buf, sizeof(buf)), want,
	    "style %d, %llu bytes: '%s', not '%s'", (int)style,
	    (unsigned long long)n, buf, want);
}

Test(size, parse)
{
	uint64_t	v;

	cr_expect_eq(size_parse("4096", &v), 0);
	cr_expect_eq(v, 4096);
	cr_expect_eq(size_parse("2m", &v), 0);
	cr_expect_eq(v, 2 * MiB);
	cr_expect_eq(size_parse("1T", &v), 0);
	cr_expect_eq(v, TiB);
	cr_expect_eq(size_parse("-1", &v), -1);
	cr_expect_eq(size_parse(" 1", &v), -1);
	cr_expect_eq(size_parse("1MB", &v), -1);
	cr_expect_eq(size_parse("99999999999999999999", &v), -1);
	cr_expect_eq(size_parse("17179869184G", &v), -1);	/* 2^64 */
}

Test(size, parse_max)
{
	size_t	v = 7;

	cr_expect_eq(size_parse_max("512M", GiB, &v), 0);
	cr_expect_eq(v, 512 * MiB);
	cr_expect_eq(size_parse_max("1G", GiB, &v), 0);
	cr_expect_eq(v, GiB);
	v = 7;
	cr_expect_eq(size_parse_max("2G", GiB, &v), -1);
	cr_expect_eq(size_parse_max("0", GiB, &v), -1);
	cr_expect_eq(size_parse_max("x", GiB, &v), -1);
	cr_expect_eq(v, 7, "a refused size must not be stored");
}

/* hpz-bench: whole units only. */
Test(size, format_exact)
{
	expect_format(SIZE_FMT_EXACT, 0, "0 B");
	expect_format(SIZE_FMT_EXACT, 1000, "1000 B");
	expect_format(SIZE_FMT_EXACT, 2 * MiB, "2 MiB");
	expect_format(SIZE_FMT_EXACT, 1536 * MiB, "1536 MiB");
	expect_format(SIZE_FMT_EXACT, GiB + 1, "1073741825 B");
	expect_format(SIZE_FMT_EXACT, 2048 * TiB, "2048 TiB");
}

/* hpz-demo: whole units, or two decimals of the next one up. */
Test(size, format_round)
{
	expect_format(SIZE_FMT_ROUND, 512 * MiB, "512 MiB");
	expect_format(SIZE_FMT_ROUND, GiB, "1 GiB");
	expect_format(SIZE_FMT_ROUND, 1536 * MiB, "1.50 GiB");
	expect_format(SIZE_FMT_ROUND, 1023 * KiB, "1023 KiB");
	expect_format(SIZE_FMT_ROUND, 3000, "2.93 KiB");
	/* TiB is the last unit: no decimals of a next one. */
	expect_format(SIZE_FMT_ROUND, 2048 * TiB, "2048 TiB");
}

/* hpzctl: two decimals of the largest unit below 1024 of it. */
Test(size, format_decimal)
{
	expect_format(SIZE_FMT_DECIMAL, 0, "0 B");
	expect_format(SIZE_FMT_DECIMAL, 1023, "1023 B");
	expect_format(SIZE_FMT_DECIMAL, 1024, "1.00 KiB");
	expect_format(SIZE_FMT_DECIMAL, 1536 * MiB, "1.50 GiB");
	expect_format(SIZE_FMT_DECIMAL, UINT64_MAX, "16.00 EiB");
}

Test(size, format_truncates_within_buf)
{
	char	buf[4];

	memset(buf, 'x', sizeof(buf));
	size_format(SIZE_FMT_DECIMAL, 1536 * MiB, buf, sizeof(buf));
	cr_expect_str_eq(buf, "1.5");
}
