/*
 * hpz-counters.h - the numbers of the status reply, each written once.
 *
 * Every plain 64-bit number that hpzerod sends in its status reply is one
 * line below.  From these lines come: struct stats (the daemon's atomics,
 * daemon/stats.h), struct hpz_msg_status_reply (the wire, hpz-protocol.h),
 * struct hpz_status (libhpz's API, hpz.h), the daemon's copy into the reply
 * (daemon/status.c), libhpz's copy out of it (lib/client.c), and hpzctl's
 * table and JSON keys (client/hpzctl-stats.c) and Prometheus metrics
 * (client/hpzctl-prom.c).
 *
 * A group is written HPZ_COUNTERS_x(D, V): D is called for a number the
 * daemon counts in struct stats, copied into the reply as it is; V for one
 * the daemon works out when it answers (status_fill and control-limits.c
 * fill it by hand).  Both take, in this order:
 *
 *	name	the field in every struct, the hpzctl stats name, the JSON key
 *	kind	counter (only grows) or gauge (goes up and down)
 *	unit	"ms", "ns", "bytes", "pages", or "" for a plain count; a
 *		Prometheus metric of unit "ms" is printed in seconds
 *	prom	its Prometheus metric after "hpzerod_", "" for none; lines
 *		with the same metric are one family, printed where its first
 *		line is, with that line's kind and help
 *	label	its Prometheus labels inside the braces, "" for none
 *	help	what it counts (Prometheus HELP, and the documentation here)
 *
 * The groups are in the order of the wire reply, which the numbers that
 * are not plain (strings, rates, the histogram) interleave; the reply's
 * layout and struct hpz_status's are an ABI (tests/unit/test-counters.c
 * holds them to the offsets they had).  A new number goes at the end of
 * the last group, or of a new group after everything else.
 */
#ifndef HPZ_COUNTERS_H
#define HPZ_COUNTERS_H

/* The daemon as a whole; before the fault counters. */
#define HPZ_COUNTERS_DAEMON(D, V)					\
	V(uptime_ms, gauge, "ms", "uptime_seconds", "",			\
	    "Seconds since the daemon started.")			\
	V(clients, gauge, "", "clients", "",				\
	    "Clients connected now.")					\
	V(regions, gauge, "", "regions", "",				\
	    "Regions registered now.")					\
	V(bytes_registered, gauge, "bytes", "bytes_registered", "",	\
	    "Bytes in the regions registered now.")			\
	V(workers, gauge, "", "workers", "",				\
	    "Worker threads.")

/* Faults and requests; before the clear kernels' names. */
#define HPZ_COUNTERS_FAULTS(D, V)					\
	D(faults, counter, "", "", "",					\
	    "Faults resolved.")						\
	D(faults_missing, counter, "", "faults_total", "kind=\"missing\"", \
	    "Faults resolved, by kind of page.")			\
	D(faults_minor, counter, "", "faults_total", "kind=\"minor\"",	\
	    "Faults resolved where the page was in the file.")		\
	D(faults_shared, counter, "", "", "",				\
	    "Faults resolved by another fault's work.")			\
	D(pages_cleared, counter, "pages", "pages_cleared_total",	\
	    "by=\"fault\"",						\
	    "Garbage pages cleared, to serve a fault or in the background.") \
	D(bytes_cleared, counter, "bytes", "bytes_cleared_total",	\
	    "by=\"fault\"",						\
	    "Bytes cleared, to serve a fault or in the background.")	\
	D(pages_populated, counter, "pages", "pages_populated_total",	\
	    "by=\"fault\"",						\
	    "Pages allocated, to serve a fault or ahead of the faults.") \
	D(pages_punched, counter, "pages", "", "",			\
	    "Pages given back to the file by a reset.")			\
	D(resets, counter, "", "resets_total", "",			\
	    "Successful reset requests.")				\
	D(registers, counter, "", "", "",				\
	    "Regions registered.")					\
	D(unregisters, counter, "", "", "",				\
	    "Regions unregistered.")					\
	D(requests_rejected, counter, "", "requests_rejected_total", "", \
	    "Requests answered with an error.")				\
	D(clients_dropped, counter, "", "clients_dropped_total", "",	\
	    "Client connections closed because of a protocol error.")	\
	D(fault_ns_total, counter, "ns", "", "",			\
	    "Sum of the times from reading a fault to mapping its page.") \
	D(fault_ns_max, gauge, "ns", "", "",				\
	    "Longest time from reading a fault to mapping its page.")

/* The clearing engine; after the clear kernels and clear_mbps. */
#define HPZ_COUNTERS_ENGINE(D, V)					\
	V(hot_size, gauge, "bytes", "", "",				\
	    "Neighbourhood of a fault cleared last, with the hot kernel.") \
	V(extent_max, gauge, "bytes", "", "",				\
	    "Largest single clear.")					\
	D(bulk_bytes, counter, "bytes", "", "",				\
	    "Bytes cleared with the bulk kernel.")			\
	D(bulk_ns, counter, "ns", "", "",				\
	    "Time spent clearing with the bulk kernel.")		\
	D(hot_bytes, counter, "bytes", "", "",				\
	    "Bytes cleared with the hot kernel.")			\
	D(hot_ns, counter, "ns", "", "",				\
	    "Time spent clearing with the hot kernel.")			\
	D(faults_coalesced, counter, "", "", "",			\
	    "Faults resolved with a neighbour.")			\
	D(jobs_split, counter, "", "", "",				\
	    "Clears shared by workers.")				\
	D(faults_polled, counter, "", "", "",				\
	    "Faults read by a spinning worker.")

/* Background work; after the latency histogram. */
#define HPZ_COUNTERS_BG(D, V)						\
	D(bg_pages_cleared, counter, "pages", "pages_cleared_total",	\
	    "by=\"background\"",					\
	    "Pages scrubbed ahead of the faults.")			\
	D(bg_bytes_cleared, counter, "bytes", "bytes_cleared_total",	\
	    "by=\"background\"",					\
	    "Bytes scrubbed ahead of the faults.")			\
	D(bg_ns, counter, "ns", "", "",					\
	    "Time spent scrubbing.")					\
	D(bg_pages_populated, counter, "pages", "pages_populated_total", \
	    "by=\"background\"",					\
	    "Pages allocated ahead of the faults.")			\
	D(bg_pages_premapped, counter, "pages", "pages_premapped_total", \
	    "",								\
	    "Pages mapped into a client before it touched them.")	\
	V(bg_pages_pending, gauge, "pages", "background_pending_pages",	\
	    "",								\
	    "Garbage pages of every region not yet cleared.")		\
	D(bg_throttle_ns, counter, "ns", "", "",			\
	    "Time background work waited on the budgets.")

/*
 * The limits in force (0: none; hpzerod.conf(5) [limits]) and what the
 * asking uid holds of them; after the background budgets.
 */
#define HPZ_COUNTERS_LIMITS(D, V)					\
	V(limit_uid_clients, gauge, "", "", "",				\
	    "Connections a uid may hold.")				\
	V(limit_uid_regions, gauge, "", "", "",				\
	    "Regions a uid may hold.")					\
	V(limit_uid_bytes, gauge, "bytes", "", "",			\
	    "Bytes of a uid's files the daemon may map.")				\
	V(limit_uid_state_bytes, gauge, "bytes", "", "",		\
	    "Page-state bytes a uid may hold.")				\
	V(limit_region_pages, gauge, "pages", "", "",			\
	    "Pages a region may have.")					\
	V(limit_conn_regions, gauge, "", "", "",			\
	    "Regions a connection may hold (built in).")		\
	V(uid_clients, gauge, "", "", "",				\
	    "Connections the asking uid holds.")			\
	V(uid_regions, gauge, "", "", "",				\
	    "Regions the asking uid holds.")				\
	V(uid_bytes, gauge, "bytes", "", "",				\
	    "Bytes of the asking uid's files the daemon maps now.")			\
	V(uid_state_bytes, gauge, "bytes", "", "",			\
	    "Page-state bytes the asking uid holds.")			\
	V(fds_closing, gauge, "", "", "",				\
	    "Passed file descriptors not yet closed.")

/*
 * What a fault costs here, measured at start (0: not measured; cost.c);
 * after the limits.  struct hpz_status has cost_rt_huge between the first
 * and the others, the wire has it after them.
 */
#define HPZ_COUNTERS_COST_RT(D, V)					\
	V(cost_rt_ns, gauge, "ns", "", "",				\
	    "Round trip of a userfaultfd fault, the page cached.")
#define HPZ_COUNTERS_COST(D, V)						\
	V(cost_kzero_ns, gauge, "ns", "", "",				\
	    "The kernel zeroing a 2 MiB page.")				\
	V(cost_ktouch_ns, gauge, "ns", "", "",				\
	    "The kernel's first touch of a 2 MiB page: fault and zeroing.") \
	V(cost_clear_ns, gauge, "ns", "", "",				\
	    "hpzerod's bulk clear of a 2 MiB page.")

/*
 * Faults intercepted only while a region holds garbage (intercept.c);
 * after the [policy] words.
 */
#define HPZ_COUNTERS_INTERCEPT(D, V)					\
	V(regions_intercepting, gauge, "", "", "",			\
	    "Regions trapping their faults now.")			\
	D(intercept_on, counter, "", "", "",				\
	    "Switches of a range to trapping its faults.")		\
	D(intercept_off, counter, "", "", "",				\
	    "Switches of a range back to the kernel.")			\
	D(steps_aside, counter, "", "", "",				\
	    "Garbage dropped for the kernel to zero.")			\
	D(pages_aside, counter, "pages", "", "",			\
	    "Pages so dropped.")					\
	D(workers_stuck, gauge, "", "workers_stuck", "",		\
	    "Workers stuck now in an ioctl on a client's memory map.")	\
	D(workers_spare, gauge, "", "", "",				\
	    "Spare workers made while others were stuck.")		\
	D(bg_threads_stuck, gauge, "", "", "",				\
	    "Background threads stuck now in such an ioctl.")		\
	D(threads_stuck_total, counter, "", "threads_stuck_total", "",	\
	    "Times a thread was found stuck in a client's ioctl.")	\
	D(work_taken_over, counter, "", "", "",				\
	    "Queued work moved off a stuck worker.")

/* What the background leaves to the faults (scrub.c); after the rest. */
#define HPZ_COUNTERS_SPARE(D, V)					\
	D(bg_pages_spared, counter, "pages", "", "",			\
	    "Pages the background left unallocated: the host at its "	\
	    "huge page reserve, a shmem region's refills spent, or a "	\
	    "shmem hole.")

/* Client contexts (daemon/cctx.c): a thread per client process. */
#define HPZ_COUNTERS_CCTX(D, V)						\
	V(contexts, gauge, "", "client_contexts", "",			\
	    "Client contexts with a thread now.")			\
	V(contexts_stuck, gauge, "", "client_contexts_stuck", "",	\
	    "Client contexts stuck now over a second in a system call "	\
	    "on what their client owns.")				\
	V(context_stuck_ms, gauge, "ms", "", "",			\
	    "How long the longest stuck context has waited.")		\
	V(context_stuck_pid, gauge, "", "", "",				\
	    "The client process of the longest stuck context.")		\
	D(contexts_stuck_total, counter, "", "client_contexts_stuck_total", \
	    "", "Times a client context was found stuck.")		\
	D(requests_refused_stuck, counter, "", "", "",			\
	    "Requests refused: the uid had too many stuck contexts.")

/* What serving costs now (daemon/cost.c), after the contexts' text. */
#define HPZ_COUNTERS_COST_LIVE(D, V)					\
	V(cost_served_ns, gauge, "ns", "", "",				\
	    "A garbage 2 MiB fault of late, read to answer (0: none).")

/*
 * What all clients share and its bounds (hpzerod.conf(5) [limits]):
 * the daemon's address space its mappings of clients' files take
 * (control-limits.c), the client contexts' threads (cctx.c); last.
 */
#define HPZ_COUNTERS_SHARED(D, V)					\
	V(limit_map_bytes, gauge, "bytes", "", "",			\
	    "Bytes of clients' files the daemon may map, all uids.")	\
	V(map_bytes, gauge, "bytes", "client_mapped_bytes", "",		\
	    "Bytes of clients' files the daemon maps now, all uids.")	\
	V(limit_uid_contexts, gauge, "", "", "",			\
	    "Client contexts a uid may have at work.")			\
	V(limit_threads, gauge, "", "", "",				\
	    "Threads all client contexts may have.")			\
	V(ctx_threads, gauge, "", "client_context_threads", "",		\
	    "Threads client contexts have now.")

/* Limits added after the cost figures (protocol 9). */
#define HPZ_COUNTERS_LIMITS_MORE(D, V)					\
	V(limit_region_forks, gauge, "", "", "",			\
	    "Forked children a region may have at once (0: unlimited).")

/* Every group, in the order of the wire reply. */
#define HPZ_COUNTERS_ALL(D, V)						\
	HPZ_COUNTERS_DAEMON(D, V)					\
	HPZ_COUNTERS_FAULTS(D, V)					\
	HPZ_COUNTERS_ENGINE(D, V)					\
	HPZ_COUNTERS_BG(D, V)						\
	HPZ_COUNTERS_LIMITS(D, V)					\
	HPZ_COUNTERS_COST_RT(D, V)					\
	HPZ_COUNTERS_COST(D, V)						\
	HPZ_COUNTERS_INTERCEPT(D, V)					\
	HPZ_COUNTERS_SPARE(D, V)					\
	HPZ_COUNTERS_CCTX(D, V)						\
	HPZ_COUNTERS_COST_LIVE(D, V)					\
	HPZ_COUNTERS_SHARED(D, V)					\
	HPZ_COUNTERS_LIMITS_MORE(D, V)

#endif /* HPZ_COUNTERS_H */
