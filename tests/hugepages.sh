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

# hp_adjust FILE DELTA: add DELTA (negative to give back), never below 0.
hp_adjust() {
	[ -w "$1" ] || return 1
	(
		flock 9
		v=$(cat "$1") || exit 1
		n=$((v + $2))
		[ "$n" -lt 0 ] && n=0
		echo "$n" > "$1"
	) 9>"$HP_LOCK" 2>/dev/null
}

# hp_reserve_2m N / hp_reserve_1g N: grow the pool by N pages.
hp_reserve_2m() {
	hp_adjust "$HP_2M" "$1" && hp_added_2m=$((hp_added_2m + $1))
}
hp_reserve_1g() {
	hp_adjust "$HP_1G" "$1" && hp_added_1g=$((hp_added_1g + $1))
}

# hp_release: give back everything this script added.
hp_release() {
	[ "$hp_added_2m" -gt 0 ] && hp_adjust "$HP_2M" "-$hp_added_2m"
	[ "$hp_added_1g" -gt 0 ] && hp_adjust "$HP_1G" "-$hp_added_1g"
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
