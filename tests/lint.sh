#!/bin/bash
#
# lint.sh - static checks of what ships beside the code: the man pages
# (mandoc -Tlint), the generated systemd units (systemd-analyze verify),
# the layers of the C sources (no file includes a higher layer's header),
# and the circles of files (no two files of a program call each other).
#
# Run by `make check` with HPZ_SRCDIR (the source tree) and HPZ_BUILDDIR
# (the build tree, holding systemd/hpzerod.service and .socket, and
# systemd/sysusers.d/hpzerod.conf, which makes group hpz).  Every
# check prints one line.  Exit status: 0 all passed; 1 something failed;
# 77 (automake's SKIP) nothing failed but a part was skipped because its
# tool is missing.

set -u

srcdir=${HPZ_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
builddir=${HPZ_BUILDDIR:-$srcdir}
units="hpzerod.service hpzerod.socket"

passed=0
failed=0
skipped=0

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hpz-lint.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

pass() {
	printf 'ok   %s\n' "$1"
	passed=$((passed + 1))
}

# fail WHAT [OUTPUT]: the output, if any, follows indented.
fail() {
	printf 'FAIL %s\n' "$1"
	if [ -n "${2:-}" ]; then
		printf '%s\n' "$2" | sed 's/^/     | /'
	fi
	failed=$((failed + 1))
}

skip() {
	printf 'SKIP %s\n' "$1"
	skipped=$((skipped + 1))
}

# --- man pages: mandoc must have nothing to say ---------------------------
lint_man() {
	local page out found=0

	if ! command -v mandoc >/dev/null 2>&1; then
		skip "man pages: mandoc is not installed"
		return
	fi
	for page in "$srcdir"/man/*.[0-9]; do
		[ -e "$page" ] || continue
		found=1
		out=$(mandoc -Tlint -W warning "$page" 2>&1)
		if [ $? -eq 0 ] && [ -z "$out" ]; then
			pass "mandoc -Tlint: man/${page##*/}"
		else
			fail "mandoc -Tlint: man/${page##*/}" "$out"
		fi
	done
	if [ "$found" -eq 0 ]; then
		fail "man pages: none found in $srcdir/man"
	fi
}

# --- systemd units ---------------------------------------------------------

# Put the units in $tmp/units: the generated ones from the build tree, or,
# when there are none (lint.sh run by hand), made from the .in files here.
stage_units() {
	local u

	mkdir -p "$tmp/units" || return 1
	for u in $units; do
		if [ -f "$builddir/systemd/$u" ]; then
			cp "$builddir/systemd/$u" "$tmp/units/$u" || return 1
		elif [ -f "$srcdir/systemd/$u.in" ]; then
			echo "note $u: not generated in $builddir, made from $u.in"
			sed -e 's|@sbindir[@]|/usr/local/sbin|g' \
			    -e 's|@bindir[@]|/usr/local/bin|g' \
			    "$srcdir/systemd/$u.in" >"$tmp/units/$u" || return 1
		else
			fail "systemd: $u: neither $builddir/systemd/$u nor" \
			    "$srcdir/systemd/$u.in exists"
			return 1
		fi
	done
	return 0
}

# Every substitution must have been made.
lint_substituted() {
	local u out

	for u in $units; do
		out=$(grep -n '@[A-Za-z_]*@' "$tmp/units/$u")
		if [ -z "$out" ]; then
			pass "substituted: $u"
		else
			fail "substituted: $u" "$out"
		fi
	done
}

# Every Documentation=man:PAGE(SECTION) must name a page of this tree.
lint_doc_links() {
	local u ref name sect missing

	for u in $units; do
		missing=
		for ref in $(sed -n 's/^Documentation=//p' "$tmp/units/$u"); do
			case $ref in
			man:*\(*\))
				name=${ref#man:}
				sect=${name##*\(}
				sect=${sect%\)}
				name=${name%\(*}
				[ -f "$srcdir/man/$name.$sect" ] ||
				    missing="$missing $ref"
				;;
			esac
		done
		if [ -z "$missing" ]; then
			pass "documentation links: $u"
		else
			fail "documentation links: $u" "no page for:$missing"
		fi
	done
}

# systemd-analyze verify checks that ExecStart= is executable, but the
# daemon is not installed yet: point ExecStart= at a stand-in of the same
# name under $tmp/root.  man: links are checked above (--man=no here, so
# that the result does not depend on man-db).  Both units are verified
# together, so that the dependency of one on the other resolves.
lint_verify() {
	local u path out rc

	if ! command -v systemd-analyze >/dev/null 2>&1; then
		skip "systemd units: systemd-analyze is not installed"
		return
	fi
	mkdir -p "$tmp/verify" || return
	for u in $units; do
		for path in $(sed -n \
		    's/^Exec[A-Za-z]*=[-@:+!]*\(\/[^[:space:]]*\).*/\1/p' \
		    "$tmp/units/$u"); do
			mkdir -p "$tmp/root${path%/*}" &&
			    printf '#!/bin/sh\nexit 0\n' >"$tmp/root$path" &&
			    chmod 755 "$tmp/root$path" || return
		done
		sed -e "s|^\\(Exec[A-Za-z]*=[-@:+!]*\\)/|\\1$tmp/root/|" \
		    "$tmp/units/$u" >"$tmp/verify/$u" || return
	done
	out=$(cd "$tmp/verify" && SYSTEMD_LOG_COLOR=0 \
	    systemd-analyze verify --man=no $(printf './%s ' $units) \
	    2>&1 >/dev/null)
	rc=$?
	if [ $rc -eq 0 ] && [ -z "$out" ]; then
		pass "systemd-analyze verify: $units"
	else
		fail "systemd-analyze verify: $units (exit $rc)" \
		    "${out//$tmp\/verify\//}"
	fi
}

# The sysusers.d file must parse: systemd-sysusers, dry run, against an
# empty root.  (systemd-analyze verify needs no group hpz: SocketGroup= is
# only looked up when the socket is made.)
lint_sysusers() {
	local f out

	f=$(cd "$builddir" 2>/dev/null && pwd)/systemd/sysusers.d/hpzerod.conf
	if ! command -v systemd-sysusers >/dev/null 2>&1; then
		skip "sysusers.d: systemd-sysusers is not installed"
		return
	fi
	if [ ! -f "$f" ]; then
		f=$(cd "$srcdir" && pwd)/systemd/hpzerod.sysusers.in
		echo "note sysusers.d/hpzerod.conf: not generated in $builddir," \
		    "checking hpzerod.sysusers.in"
	fi
	mkdir -p "$tmp/sysroot/etc" || return
	out=$(SYSTEMD_LOG_COLOR=0 systemd-sysusers --dry-run \
	    --root="$tmp/sysroot" "$f" 2>&1)
	if [ $? -eq 0 ] && printf '%s\n' "$out" | grep -q "group 'hpz'" &&
	    ! printf '%s\n' "$out" | grep -qi 'fail\|ignor\|unknown\|invalid'
	then
		pass "systemd-sysusers --dry-run: group hpz"
	else
		fail "systemd-sysusers --dry-run: sysusers.d/hpzerod.conf" "$out"
	fi
}

# --- layers: no file includes the header of a layer above it --------------

# The daemon is a stack (doc/layout.md, "daemon/"): a module calls
# only down, and is handed a callback where it must reach up.  Every file
# of daemon/ and lib/ has its layer here; an include of a higher layer's
# header fails.  A new daemon file must be placed in the table.  A lib/
# file not in it is named in a note and not checked.
lint_layer_table() {
	cat <<'EOF_LAYERS'
# 1 base: what every layer uses, and lib's code that the daemon shares
daemon/log.c 1		daemon/log.h 1
daemon/globals.c 1	daemon/globals.h 1
daemon/bucket.c 1	daemon/bucket.h 1
daemon/plan.c 1		daemon/plan.h 1
daemon/topo.c 1		daemon/topo.h 1
daemon/clear.c 1	daemon/clear.h 1
daemon/conf.c 1		daemon/conf-file.c 1	daemon/conf.h 1
daemon/stats.c 1	daemon/stats.h 1
daemon/cctx.c 1		daemon/cctx.h 1
daemon/prep-thread.c 1	daemon/prep-thread.h 1
daemon/reap.c 1		daemon/reap.h 1
daemon/hostmem.c 1	daemon/hostmem.h 1
lib/hpz.h 1		lib/hpz.h.in 1		lib/hpz-counters.h 1
lib/hpz-protocol.h 1	lib/hpz-state.h 1	lib/uffd-compat.h 1
lib/resolve.c 1		lib/resolve.h 1		lib/state.c 1
lib/proto.c 1		lib/size.c 1		lib/size.h 1
lib/clock.c 1		lib/clock.h 1		lib/mappers.c 1
lib/mappers.h 1		lib/uffdio.c 1		lib/uffdio.h 1
# 2 engine: the fault workers, a leaf that runs work->run
daemon/worker.c 2	daemon/worker.h 2
# 3 page path: the region object, faults, events, scrub, intercept, cost
daemon/region.h 3	daemon/region-page.c 3
daemon/control-state.h 3	# control's slice of struct region, typed low
daemon/uffd.c 3		daemon/uffd.h 3
daemon/fault.c 3		daemon/fault.h 3
daemon/scrub.c 3	daemon/scrub.h 3
daemon/intercept.c 3	daemon/intercept.h 3
daemon/cost.c 3		daemon/cost.h 3
daemon/keep.c 3		daemon/keep.h 3	# a released region's garbage, cleared in place
# 4 regions: lifecycle and tending, validation, prep, fd store, pool
daemon/region.c 4	daemon/region-life.h 4
daemon/region-check.c 4	daemon/region-check.h 4
daemon/prep.c 4		daemon/prep.h 4
daemon/fdstore.c 4	daemon/fdstore.h 4
daemon/pool.c 4		daemon/pool.h 4
daemon/pool-fill.c 4	daemon/pool-fill.h 4
daemon/pool-hold.c 4	daemon/pool-hold.h 4
# 5 control: the socket, its requests, the status replies
daemon/control.c 5	daemon/control.h 5
daemon/control-client.c 5	daemon/control-client.h 5
daemon/control-limits.c 5	daemon/control-limits.h 5
daemon/control-orphan.c 5	daemon/control-orphan.h 5
daemon/control-pool.c 5	daemon/control-pool.h 5
daemon/control-socket.c 5	daemon/control-socket.h 5
daemon/status.c 5	daemon/status.h 5
# 6 main
daemon/hpzerod.c 6
# libhpz above its shared code (no daemon file may include it)
lib/libhpz.h 9		lib/client.c 9		lib/serve.c 9
lib/region.c 9		lib/pool.c 9		lib/conn.c 9
lib/registry.c 9		lib/guard.c 9
EOF_LAYERS
}

lint_layers() {
	local table f dir layer inc path hl bad= unknown= n=0

	table=$(lint_layer_table | sed 's/#.*//' | tr -s ' \t\n' '\n' |
	    grep -v '^$' | paste - -)
	layer_of() {
		printf '%s\n' "$table" | awk -v f="$1" '$1 == f { print $2 }'
	}
	for f in "$srcdir"/daemon/*.[ch] "$srcdir"/lib/*.[ch] \
	    "$srcdir"/lib/hpz.h.in; do
		[ -e "$f" ] || continue
		dir=${f%/*}
		dir=${dir##*/}
		path=$dir/${f##*/}
		layer=$(layer_of "$path")
		if [ -z "$layer" ]; then
			unknown="$unknown $path"
			continue
		fi
		n=$((n + 1))
		for inc in $(sed -n 's/^#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
			if [ -e "$srcdir/$dir/$inc" ]; then
				hl=$(layer_of "$dir/$inc")
				inc=$dir/$inc
			elif [ -e "$srcdir/lib/$inc" ] || [ "$inc" = hpz.h ]; then
				hl=$(layer_of "lib/$inc")
				inc=lib/$inc
			else
				continue	# config.h and the like
			fi
			if [ -z "$hl" ]; then
				unknown="$unknown $inc"
				continue
			fi
			if [ "$hl" -gt "$layer" ]; then
				bad="$bad
$path (layer $layer) includes $inc (layer $hl)"
			fi
		done
	done
	if [ -n "$unknown" ]; then
		fail "layers: daemon/ or lib/ files not in the table of tests/lint.sh" \
		    "$(printf '%s\n' $unknown | sort -u)"
	elif [ -n "$bad" ]; then
		fail "layers: an include of a higher layer" "${bad#
}"
	else
		pass "layers: $n files, no include of a higher layer"
	fi
}

# --- circles: no two files of a program call each other -------------------

# The file graph of one program or library, from its built objects: file
# A -> file B when A's object uses a global symbol B's defines (nm).  A
# circle (A calls B, B calls A, perhaps through others) means neither
# can be read, tested or changed without the other: each file has its
# place and calls only the files below it, and is handed a callback where
# it must reach up.  The known circles are listed here, each with what
# holds it; a new one fails.
lint_circles_known() {
	cat <<'EOF_CIRCLES'
# (none: each would be "PROGRAM: file file ...", with what holds it)
EOF_CIRCLES
}

# lint_circles_of NAME OBJ...: the circles of NAME's files, one a line,
# members sorted, as "NAME: a b c".
lint_circles_of() {
	local name=$1 o f

	shift
	: >"$tmp/def"
	: >"$tmp/use"
	for o in "$@"; do
		f=${o##*/}
		f=${f%.o}
		f=${f#*-}	# automake's per-target prefix
		nm -g --defined-only "$o" |
		    awk -v f="$f" 'NF == 3 { print $3, f }' >>"$tmp/def"
		nm -u "$o" | awk -v f="$f" '{ print $NF, f }' >>"$tmp/use"
	done
	sort -u "$tmp/def" >"$tmp/d"
	sort -u "$tmp/use" >"$tmp/u"
	join "$tmp/u" "$tmp/d" | awk '$2 != $3 { print $2, $3 }' | sort -u |
	    awk -v name="$name" '
	{ adj[$1] = adj[$1] " " $2; node[$1]; node[$2] }
	END {
		for (a in node) {
			split("", seen)
			q[0] = a; h = 0; t = 1
			while (h < t) {
				x = q[h++]
				m = split(adj[x], nb, " ")
				for (i = 1; i <= m; i++)
					if (!(nb[i] in seen)) {
						seen[nb[i]]
						q[t++] = nb[i]
					}
			}
			for (b in seen)
				reach[a, b] = 1
		}
		for (a in node) {
			if (a in done || !((a, a) in reach))
				continue
			c = ""
			for (b in node)
				if ((a, b) in reach && (b, a) in reach) {
					c = c " " b
					done[b]
				}
			print name ":" c
		}
	}' | while read -r label members; do
		printf '%s %s\n' "$label" \
		    "$(printf '%s\n' $members | sort | tr '\n' ' ' | sed 's/ $//')"
	done
}

lint_circles() {
	local b=$builddir found known new n=0 set

	if ! command -v nm >/dev/null 2>&1; then
		skip "circles: nm is not installed"
		return
	fi
	if [ ! -e "$b/daemon/hpzerod" ] || [ ! -e "$b/client/hpzctl" ]; then
		skip "circles: nothing built in $b"
		return
	fi
	found=$(
	    lint_circles_of hpzerod "$b"/daemon/libhpzd_a-*.o \
		"$b"/daemon/hpzerod-*.o
	    lint_circles_of libhpz "$b"/lib/.libs/*.o
	    lint_circles_of hpzctl "$b"/client/hpzctl-*.o
	    lint_circles_of hpz-bench "$b"/client/hpz_bench-*.o
	    lint_circles_of preload "$b"/client/.libs/libhpz_preload_la-*.o
	    lint_circles_of libhpzcli "$b"/client/.libs/libhpzcli_la-*.o)
	known=$(lint_circles_known | sed 's/#.*//' | grep -v '^[[:space:]]*$')
	new=$(printf '%s\n' "$found" | grep -v '^$' || true)
	if [ -n "$known" ]; then
		new=$(printf '%s\n' "$new" | grep -vxF "$known" || true)
	fi
	for set in hpzerod libhpz hpzctl hpz-bench preload libhpzcli; do
		n=$((n + 1))
	done
	if [ -n "$new" ]; then
		fail "circles: files of a program that call each other" "$new"
	else
		pass "circles: $n programs, no circle (known ones: $(printf \
		    '%s\n' "$known" | grep -c .))"
	fi
}

lint_man
if stage_units; then
	lint_substituted
	lint_doc_links
	lint_verify
fi
lint_sysusers
lint_layers
lint_circles

echo "lint: $passed passed, $failed failed"
if [ "$failed" -ne 0 ]; then
	exit 1
fi
if [ "$skipped" -ne 0 ]; then
	exit 77
fi
exit 0
