/*
 * bench-table.c - what hpz-bench knows, for each of its files: the page
 * sizes, the modes, the figures of a run and the extra figures of the
 * background and pool modes (and which modes have which).  Under every
 * other file of hpz-bench; calls none of them.
 */
#include <string.h>
#include <sys/mman.h>

#include "hpz.h"
#include "uffd-compat.h"
#include "bench.h"

const struct bench_page bench_pages[] = {
	{ "2m", "2 MiB", 2UL << 20, HPZ_PAGE_2M, MFD_HUGE_2MB, "us", 1.0 },
	{ "1g", "1 GiB", 1UL << 30, HPZ_PAGE_1G, MFD_HUGE_1GB, "ms", 1000.0 },
};

const struct bench_mode bench_modes[] = {
	{ "recycled",		HPZ_NO_SCRUB,		1, 0, 0, BG_NONE,
	    "HPZ_NO_SCRUB: every garbage page cleared by its fault" },
	{ "fresh",		0,			0, 0, 0, BG_NONE,
	    NULL },
	{ "fresh-discard",	HPZ_DISCARD | HPZ_NO_SCRUB, 0, 0, 0, BG_NONE,
	    "fresh, HPZ_DISCARD|HPZ_NO_SCRUB: each first touch allocates and"
	    " clears" },
	{ "idle-recycled",	0,			1, 1, 0, BG_CLEAR,
	    "written, hpz_reset, idle while the scrubbers clear it, touched" },
	{ "idle-premap",	HPZ_PREMAP,		1, 1, 0, BG_CLEAR,
	    "HPZ_PREMAP; written, hpz_reset, idle while the scrubbers clear"
	    " and map it, touched" },
	{ "idle-fresh-eager",	HPZ_AHEAD_EAGER,	0, 1, 0, BG_POPULATE,
	    "fresh, HPZ_AHEAD_EAGER; idle while it is allocated, touched" },
	{ "idle-fresh-eager-premap", HPZ_AHEAD_EAGER | HPZ_PREMAP,
						0, 1, 0, BG_POPULATE,
	    "fresh, HPZ_AHEAD_EAGER|HPZ_PREMAP; idle while it is allocated"
	    " and mapped, touched" },
	{ "onfault-ahead",	HPZ_AHEAD_ONFAULT,	0, 0, 0, BG_POPULATE,
	    "fresh, HPZ_AHEAD_ONFAULT; touched at once" },
	{ "busy-recycled",	0,			1, 0, 1, BG_CLEAR,
	    "written, hpz_reset and touched right after a second region's"
	    " hpz_reset (busy), beside the same touch alone (quiet)" },
	{ "pool",		0,			0, 0, 0, BG_NONE,
	    "hpz_region_create after an idle pause: a file of the pool,"
	    " touched unregistered" },
	{ "pool-premap",	HPZ_PREMAP,		0, 0, 0, BG_NONE,
	    "the same, HPZ_PREMAP: hpz_region_create maps the pool's pages" },
	{ "pool-register",	0,			0, 0, 0, BG_NONE,
	    "the same, registered with default flags before the touch" },
};

const struct bench_fig bench_figs[BENCH_NFIGS] = {
	{ "touch_gbs",			"touch GB/s",		0, 0 },
	{ "fault_p50_us",		"fault p50",		1, 0 },
	{ "fault_p99_us",		"fault p99",		1, 1 },
	{ "fault_max_us",		"fault max",		1, 1 },
	{ "read_after_fault_p50_ns",	"read-after-fault p50",	0, 0 },
	{ "read_after_fault_p99_ns",	"read-after-fault p99",	0, 1 },
};

const struct bench_xfig bench_x[BENCH_NX] = {
	{ "idle_ms",			"idle ms",		XF_FIG },
	{ "bg_done_ms",			"bg done ms",		XF_FIG },
	{ "premap_done_ms",		"all premapped ms",	XF_FIG },
	{ "bg_gbs",			"bg GB/s",		XF_FIG },
	{ "bg_over_1core",		"bg / 1-core clear",	XF_RATIO },
	{ "scrubber_gbs_while_clearing", "scrubber GB/s clearing", XF_FIG },
	{ "bg_pages_cleared",		"bg pages cleared",	XF_COUNT },
	{ "bg_pages_populated",		"bg pages populated",	XF_COUNT },
	{ "bg_pages_premapped",		"bg pages premapped",	XF_COUNT },
	{ "touch_faults",		"faults in the touch",	XF_COUNT },
	{ "touch_faults_missing",	"  of which missing",	XF_COUNT },
	{ "touch_bg_pages_cleared",	"bg pages cleared in it", XF_COUNT },
	{ "pending_after_touch",	"pending after touch",	XF_COUNT },
	{ "create_ms",			"hpz_region_create ms",	XF_FIG },
	{ "pool_pages",			"pages from the pool",	XF_COUNT },
	{ "create_touch_gbs",		"create+touch GB/s",	XF_FIG },
};

const char *const bench_sides[BENCH_NSIDES] = {
	"kernel", "hpzerod", "ratio"
};

/* Is m one of the pool modes? */
int
bench_mode_pool(const struct bench_mode *m)
{
	return (strncmp(m->name, "pool", 4) == 0);
}

/* Which bench_x figures a mode has. */
int
bench_x_applies(const struct bench_mode *m, int x)
{
	if (bench_mode_pool(m))
		return (x == X_IDLE_MS || x == X_CREATE_MS ||
		    x == X_POOL_PAGES || x == X_CREATE_TOUCH_GBS ||
		    x == X_TOUCH_FAULTS);
	if (m->bg == BG_NONE)
		return (0);
	switch (x) {
	case X_IDLE_MS:
	case X_DONE_MS:
		return (m->idle);
	case X_PREMAP_MS:
		return (m->idle && (m->flags & HPZ_PREMAP) != 0);
	case X_BG_GBS:
	case X_BG_1CORE:
	case X_TOUCH_FAULTS:
		return (1);
	case X_SCRUB_GBS:
	case X_BG_CLEARED:
		return (m->bg == BG_CLEAR);
	case X_BG_POPULATED:
	case X_TOUCH_MISSING:
		return (m->bg == BG_POPULATE);
	case X_BG_PREMAPPED:
		return ((m->flags & HPZ_PREMAP) != 0);
	case X_TOUCH_BG_CLEARED:
	case X_PENDING_AFTER:
		return (m->busy);
	}
	return (0);
}
