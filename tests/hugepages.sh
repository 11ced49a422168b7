# hugepages.sh - sourced by the test scripts that need huge pages.
#
# The pool is shared: make -j check runs several of these scripts at once,
# and other users may hold pages too.  So a script never writes back a
# count it read earlier (that would undo a neighbour's reservation, or
# leave its own behind); it adds what it needs and later takes away
# exactly that, each change made under one lock.

HP_LOCK=${HP_LOCK:-/tmp/hpz-hugepages.lock}
HP_2M=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
HP_1G=/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages
hp_added_2m=0
hp_added_1g=0

# hp_adjust FILE DELTA: add DELTA (negative to give back), never below 0;
# print the change the kernel made (it may find fewer pages than asked).
hp_adjust() {
	[ -w "$1" ] || return 1
	(
		flock 9
		v=$(cat "$1") || exit 1
		n=$((v + $2))
		[ "$n" -lt 0 ] && n=0
		echo "$n" > "$1"
		echo $(($(cat "$1") - v))
	) 9>"$HP_LOCK" 2>/dev/null
}

# hp_reserve_2m N / hp_reserve_1g N: grow the pool by N pages; only what
# the kernel gave is counted (and given back later).  Fails only when the
# pool cannot be changed at all: callers read the free count themselves.
hp_reserve_2m() {
	local d
	d=$(hp_adjust "$HP_2M" "$1") || return 1
	hp_added_2m=$((hp_added_2m + d))
}
hp_reserve_1g() {
	local d got
	got=$(hp_adjust "$HP_1G" "$1") || return 1
	hp_added_1g=$((hp_added_1g + got))
	[ "$got" -ge "$1" ] && return 0
	# A VM that backs its memory lazily has few free 1 GiB ranges until
	# its memory was touched once: touch it, compact, ask again.
	# Once with HP_WARM_GIB; if pages are still missing (after a CI run
	# 16 GiB gave 3 of 7 here), once more with all the room there is.
	for pass in 1 2; do
		hp_warm_1g "$1" "$got" "$pass"
		d=$(hp_adjust "$HP_1G" $(($1 - got))) || return 1
		hp_added_1g=$((hp_added_1g + d))
		got=$((got + d))
		echo "hugepages: $got of $1 1 GiB pages after that" >&2
		[ "$got" -ge "$1" ] && break
	done
	return 0
}

# hp_warm_1g N GOT PASS: map and write HP_WARM_GIB (16) GiB of anonymous
# memory once (dd's buffer, filled from /dev/zero), free it and compact.
# Slow the first time on such a VM (~0.3 GB/s), a few seconds after.  One
# script at a time (two at once ran the machine out of memory), sized under
# that lock to leave a quarter of the memory and at least 4 GiB to the
# others (pass 2: an eighth and at least 2 GiB, with no HP_WARM_GIB cap),
# and dd is the one the OOM killer takes first if it comes to that.
hp_warm_1g() {
	(
		flock 9
		room=$(awk -v pass="$3" '/^MemAvailable:/ { a = $2 }
		    /^MemTotal:/ { t = $2 }
		    END { if (pass == 2) {
				k = t / 8 > 2097152 ? t / 8 : 2097152
			} else
				k = t / 4 > 4194304 ? t / 4 : 4194304
			print int((a - k) / 1048576) }' /proc/meminfo)
		gib=${HP_WARM_GIB:-16}
		[ "$3" = 2 ] && gib=$room
		[ "$gib" -gt "$room" ] && gib=$room
		echo "hugepages: the kernel gave $2 of $1 1 GiB pages; writing" \
		    "$gib GiB of memory once and compacting, then asking again" >&2
		if [ "$gib" -gt 0 ]; then
			(echo 1000 > /proc/self/oom_score_adj
			exec dd if=/dev/zero of=/dev/null bs="${gib}G" count=1 \
			    iflag=fullblock status=none) 2>/dev/null || true
		fi
		echo 1 > /proc/sys/vm/compact_memory 2>/dev/null || true
	) 9>"$HP_LOCK.warm"
}

# hp_release: give back everything this script added.
hp_release() {
	[ "$hp_added_2m" -gt 0 ] && hp_adjust "$HP_2M" "-$hp_added_2m" >/dev/null
	[ "$hp_added_1g" -gt 0 ] && hp_adjust "$HP_1G" "-$hp_added_1g" >/dev/null
	hp_added_2m=0
	hp_added_1g=0
}
# hp_alone: wait until no other heavy test (the integration suite, the
# soak) runs, and keep them out until this script exits.  Each loads the
# 2-CPU machine enough to make the other's waits meaningless.  Children
# must not inherit the lock (start them with 8>&-), or a leftover one
# would keep it.
hp_alone() {
	exec 8>"${HP_ALONE_LOCK:-/tmp/hpz-heavy-tests.lock}"
	flock 8
}
