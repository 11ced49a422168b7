/*
 * bench-json.c - hpz-bench --json: everything it measured as one JSON
 * object (json-c), each figure with its runs, median, min and max.
 */
#include <math.h>	/* isfinite, NAN: macros, no libm */
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/utsname.h>

#include <json.h>

#include "hpz-counters.h"
#include "cli.h"
#include "bench.h"

/* json-c helpers: add a value, or fail the whole object. */
#define JADD(o, k, v) do {						\
	struct json_object *jv_ = (v);					\
	if (jv_ == NULL || cli_json_add((o), (k), jv_) != 0)		\
		goto nomem;						\
} while (0)
#define JPUSH(a, v) do {						\
	struct json_object *jv_ = (v);					\
	if (jv_ == NULL || cli_json_push((a), jv_) != 0)		\
		goto nomem;						\
} while (0)

static struct json_object *bench_json_take(struct json_object **);
static struct json_object *bench_json_num(double);
static int	bench_json_add_num(struct json_object *, const char *, double);
static int	bench_json_push_num(struct json_object *, double);
static struct json_object *bench_json_series(const double *, int);

/* Hand an object over to its parent: the caller's pointer forgets it. */
static struct json_object *
bench_json_take(struct json_object **p)
{
	struct json_object	*o = *p;

	*p = NULL;
	return (o);
}

/* A double with six significant digits; null for a missing figure. */
static struct json_object *
bench_json_num(double v)
{
	char	 s[32];

	if (!isfinite(v))
		return (json_object_new_null());
	snprintf(s, sizeof s, "%.6g", v);
	return (json_object_new_double_s(v, s));
}

/* Add a number, or null for a missing figure (json-c's null is NULL). */
static int
bench_json_add_num(struct json_object *o, const char *key, double v)
{
	struct json_object	*n = NULL;

	if (isfinite(v) && (n = bench_json_num(v)) == NULL)
		return (-1);
	return (cli_json_add(o, key, n));
}

/* Append a number, or null for a missing figure. */
static int
bench_json_push_num(struct json_object *a, double v)
{
	struct json_object	*n = NULL;

	if (isfinite(v) && (n = bench_json_num(v)) == NULL)
		return (-1);
	return (cli_json_push(a, n));
}

/* {"runs": [...], "median": m, "min": a, "max": b} */
static struct json_object *
bench_json_series(const double *v, int n)
{
	struct json_object	*o, *a = NULL;
	double			 med, min, max;
	int			 i;

	if ((o = json_object_new_object()) == NULL)
		return (NULL);
	if ((a = json_object_new_array()) == NULL)
		goto nomem;
	for (i = 0; i < n; i++)
		if (bench_json_push_num(a, v[i]) != 0)
			goto nomem;
	JADD(o, "runs", bench_json_take(&a));
	cli_stats(v, n, &med, &min, &max);
	if (bench_json_add_num(o, "median", med) != 0 ||
	    bench_json_add_num(o, "min", min) != 0 ||
	    bench_json_add_num(o, "max", max) != 0)
		goto nomem;
	return (o);
nomem:
	json_object_put(a);
	json_object_put(o);
	return (NULL);
}

/* Everything as one JSON object, for scripts. */
int
bench_json(const struct bench *b)
{
	struct json_object	*root, *o = NULL, *cases = NULL, *c = NULL;
	struct json_object	*figs = NULL, *fig = NULL;
	const struct bench_case	*bc;
	const struct clear_kernel *k;
	struct utsname		 un;
	double			 med, lo, hi, gbs, nt;
	const char		*text;
	int			 i, f, s, rc = BENCH_EXIT_FAIL;

	if ((root = json_object_new_object()) == NULL)
		goto nomem;
	JADD(root, "hpz_bench_version", json_object_new_string(HPZ_VERSION));
	JADD(root, "daemon_version",
	    json_object_new_string(b->status.version));
	JADD(root, "socket", json_object_new_string(b->socket));
	JADD(root, "runs", json_object_new_int(b->runs));

	if ((o = json_object_new_object()) == NULL)
		goto nomem;
	JADD(o, "cpu", json_object_new_string(b->cpu));
	JADD(o, "cpus_online",
	    json_object_new_int64(sysconf(_SC_NPROCESSORS_ONLN)));
	if (uname(&un) == 0) {
		JADD(o, "kernel", json_object_new_string(un.release));
		JADD(o, "arch", json_object_new_string(un.machine));
	}
	if (bench_json_add_num(o, "clock_gettime_ns", b->clock_ns) != 0)
		goto nomem;
	JADD(root, "machine", o);

	if ((o = json_object_new_object()) == NULL)
		goto nomem;
	JADD(o, "version", json_object_new_string(b->status.version));
	JADD(o, "workers", json_object_new_int64((int64_t)b->status.workers));
	JADD(o, "clear_kernel", json_object_new_string(
	    b->status.clear_kernel));
	if (bench_json_add_num(o, "clear_gbs_at_start",
	    b->status.clear_gbs) != 0)
		goto nomem;
	JADD(o, "hot_kernel", json_object_new_string(b->status.hot_kernel));
	JADD(o, "cost_round_trip_ns", json_object_new_int64((int64_t)
	    b->status.cost_rt_ns));
	JADD(o, "cost_kernel_zero_ns", json_object_new_int64((int64_t)
	    b->status.cost_kzero_ns));
	JADD(o, "cost_kernel_touch_ns", json_object_new_int64((int64_t)
	    b->status.cost_ktouch_ns));
	JADD(o, "cost_clear_ns", json_object_new_int64((int64_t)
	    b->status.cost_clear_ns));
	JADD(o, "policy_intercept", json_object_new_string(
	    b->status.policy_intercept));
	JADD(o, "policy_step_aside", json_object_new_string(
	    b->status.policy_step_aside));
	JADD(o, "hot_size", json_object_new_int64((int64_t)
	    b->status.hot_size));
	if (bench_json_add_num(o, "bg_budget_gbs",
	    b->status.bg_budget_gbs) != 0 ||
	    bench_json_add_num(o, "bg_client_budget_gbs",
	    b->status.bg_client_budget_gbs) != 0)
		goto nomem;
	JADD(root, "daemon", o);
	if (bench_json_add_num(root, "idle_ms_option", b->idle_ms >= 0 ?
	    b->idle_ms : NAN) != 0)
		goto nomem;

	if ((o = json_object_new_object()) == NULL)
		goto nomem;
	JADD(o, "buffer_bytes", json_object_new_int64(BENCH_NT_BYTES));
	JADD(o, "passes", json_object_new_int(BENCH_NT_PASSES));
	if (b->nt_ok) {
		JADD(o, "bulk_kernel", json_object_new_string(clear_kernel(
		    (enum clear_kind)b->nt_bulk)->name));
		cli_stats(b->nt[b->nt_bulk], BENCH_NT_PASSES, &med, &lo,
		    &hi);
		if (bench_json_add_num(o, "bulk_median_gbs", med) != 0 ||
		    bench_json_add_num(o, "bulk_best_gbs", hi) != 0)
			goto nomem;
	} else
		JADD(o, "error", json_object_new_string(b->nt_why));
	for (i = 0; i < CLEAR_NKINDS; i++) {
		if (!b->nt_have[i])
			continue;
		k = clear_kernel((enum clear_kind)i);
		if ((fig = json_object_new_object()) == NULL)
			goto nomem;
		JADD(fig, "nontemporal", json_object_new_boolean(
		    k->nontemporal));
		JADD(fig, "gbs", bench_json_series(b->nt[i], BENCH_NT_PASSES));
		JADD(o, k->name, bench_json_take(&fig));
	}
	JADD(root, "clear_bandwidth_1core", o);

	if ((cases = json_object_new_array()) == NULL)
		goto nomem;
	for (i = 0; i < b->ncases; i++) {
		bc = &b->cases[i];
		if ((c = json_object_new_object()) == NULL)
			goto nomem;
		JADD(c, "page", json_object_new_string(bc->page->name));
		JADD(c, "page_bytes", json_object_new_int64(
		    (int64_t)bc->page->size));
		JADD(c, "mode", json_object_new_string(
		    bench_modes[bc->mode].name));
		JADD(c, "region_flags", json_object_new_int64(
		    bench_modes[bc->mode].flags));
		JADD(c, "threads", json_object_new_int(bc->threads));
		JADD(c, "region_bytes", json_object_new_int64(
		    (int64_t)bc->size));
		JADD(c, "faults_timed_per_run", json_object_new_int64(
		    (int64_t)bc->samples));
		JADD(c, "runs_done", json_object_new_int(bc->done));
		JADD(c, "skipped", json_object_new_boolean(bc->skipped));
		if (bc->skipped)
			JADD(c, "skip_reason", json_object_new_string(bc->why));
		if (bc->done > 0) {
			if ((figs = json_object_new_object()) == NULL)
				goto nomem;
			for (f = 0; f < BENCH_NFIGS; f++) {
				if ((fig = json_object_new_object()) == NULL)
					goto nomem;
				for (s = 0; s < BENCH_NSIDES; s++)
					JADD(fig, bench_sides[s],
					    bench_json_series(bc->fig[f][s],
					    bc->done));
				JADD(figs, bench_figs[f].json,
				    bench_json_take(&fig));
			}
			JADD(c, "figures", bench_json_take(&figs));
			if (bench_modes[bc->mode].recycle)
				JADD(c, "reset_ms",
				    bench_json_series(bc->reset_ms,
				    bc->done));
			if (bc->bound_threads > 0) {
				JADD(c, "all_worker_clear_ms",
				    bench_json_series(bc->bound_ms,
				    bc->done));
				JADD(c, "all_worker_clear_over_kernel_stall",
				    bench_json_series(bc->bound_ratio,
				    bc->done));
				JADD(c, "stall_over_all_worker_clear",
				    bench_json_series(bc->bound_hpz,
				    bc->done));
				JADD(c, "all_worker_clear_threads",
				    json_object_new_int(bc->bound_threads));
			}
			if (bench_modes[bc->mode].busy) {
				if ((figs = json_object_new_object()) == NULL)
					goto nomem;
				for (f = 0; f < BENCH_NFIGS; f++) {
					if ((fig = json_object_new_object()) ==
					    NULL)
						goto nomem;
					JADD(fig, "quiet", bench_json_series(
					    bc->quiet[f][0], bc->done));
					JADD(fig, "busy_over_quiet",
					    bench_json_series(bc->quiet[f][1],
					    bc->done));
					JADD(figs, bench_figs[f].json,
					    bench_json_take(&fig));
				}
				JADD(c, "quiet_figures",
				    bench_json_take(&figs));
			}
			if (bench_modes[bc->mode].bg != BG_NONE) {
				if ((figs = json_object_new_object()) == NULL)
					goto nomem;
				JADD(figs, "kind", json_object_new_string(
				    bench_modes[bc->mode].bg == BG_CLEAR ?
				    "clear" : "populate"));
				if (bench_modes[bc->mode].idle &&
				    bench_json_add_num(figs, "poll_ms",
				    (double)bc->poll_ns / 1e6) != 0)
					goto nomem;
				for (f = 0; f < BENCH_NX; f++)
					if (bench_x_applies(&bench_modes[
					    bc->mode], f))
						JADD(figs, bench_x[f].json,
						    bench_json_series(bc->x[f],
						    bc->done));
				JADD(c, "background", bench_json_take(&figs));
			}
			if ((o = json_object_new_object()) == NULL)
				goto nomem;
			/* Every counter the daemon counts (hpz-counters.h). */
#define BENCH_DELTA_counter(name) JADD(o, #name, json_object_new_int64(	\
			    (int64_t)(bc->after.name - bc->before.name)));
#define BENCH_DELTA_gauge(name)
#define BENCH_DELTA(name, kind, unit, prom, label, help)		\
			BENCH_DELTA_##kind(name)
#define BENCH_NONE(name, kind, unit, prom, label, help)
			HPZ_COUNTERS_ALL(BENCH_DELTA, BENCH_NONE)
#undef BENCH_NONE
#undef BENCH_DELTA
#undef BENCH_DELTA_gauge
#undef BENCH_DELTA_counter
			JADD(c, "daemon_delta", o);
		}
		JPUSH(cases, bench_json_take(&c));
	}
	JADD(root, "cases", bench_json_take(&cases));
	if (bench_json_add_num(root, "recycled_2m_t1_over_clear_bandwidth",
	    bench_touch_nt_ratio(b, &gbs, &nt)) != 0)
		goto nomem;
	JADD(root, "verified_bytes",
	    json_object_new_int64((int64_t)b->verified));

	text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
	    JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
	if (text == NULL)
		goto nomem;
	printf("%s\n", text);
	rc = fflush(stdout) == 0 ? 0 : BENCH_EXIT_FAIL;
	goto out;
nomem:
	fprintf(stderr, "hpz-bench: cannot build JSON: out of memory\n");
out:
	json_object_put(fig);
	json_object_put(figs);
	json_object_put(c);
	json_object_put(cases);
	json_object_put(root);
	return (rc);
}
