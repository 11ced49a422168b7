#!/bin/bash
# install.sh - `make install DESTDIR=...` puts every piece where it belongs,
# and a program builds against the installed header and pkg-config file.
set -u
: "${HPZ_BUILDDIR:?run from make check}"
dest=$(mktemp -d /tmp/hpz-install.XXXXXX)
trap 'rm -rf "$dest"' EXIT
fail=0 pass=0
# libtool relinks the preload library in place in the build tree while it
# installs: tests that copy it (tests/qemu, tests/libvirt) take this lock.
if ! flock "${HPZ_INSTALL_LOCK:-/tmp/hpz-install.lock}" \
    make -s -C "$HPZ_BUILDDIR" install DESTDIR="$dest" >"$dest.log" 2>&1; then
	cat "$dest.log"; rm -f "$dest.log"
	echo "install: 0 passed, 1 failed"; exit 1
fi
rm -f "$dest.log"
prefix=$(sed -n 's/^prefix=//p' "$HPZ_BUILDDIR/lib/libhpz.pc")
for f in include/hpz.h include/hpz-counters.h lib/libhpz.so \
    lib/pkgconfig/libhpz.pc sbin/hpzerod bin/hpzctl bin/hpz-demo share/man/man8/hpzerod.8 share/man/man8/hpzctl.8 \
    share/man/man3/hpz_register.3 share/man/man3/hpz_reset.3 \
    share/man/man3/hpz_list_regions.3 share/man/man3/hpz_set_policy.3 \
    share/man/man1/hpz-demo.1 share/man/man1/hpz-run.1 bin/hpz-run \
    lib/hpzerod/libhpz-preload.so lib/systemd/system/hpzerod.service \
    lib/systemd/system/hpzerod.socket lib/udev/rules.d/60-hpzerod.rules; do
	if [ -e "$dest$prefix/$f" ]; then
		echo "ok   installed $prefix/$f"; pass=$((pass + 1))
	else
		echo "FAIL missing $prefix/$f"; fail=$((fail + 1))
	fi
done
if grep -q "^ExecStart=$prefix/sbin/hpzerod\$" "$dest$prefix/lib/systemd/system/hpzerod.service"; then
	echo "ok   unit runs $prefix/sbin/hpzerod"; pass=$((pass + 1))
else
	echo "FAIL unit ExecStart is not $prefix/sbin/hpzerod"; fail=$((fail + 1))
fi
# A client built only from what was installed.
cat >"$dest/t.c" <<'C'
#include <hpz.h>
#include <stdio.h>
int main(void) { struct hpz_region r = { 0 };
	struct hpz_status s = { .faults = 1 }; (void)r; (void)s;
	printf("%s\n", hpz_strerror(-ECONNREFUSED)); return 0; }
C
sed -i '1i #include <errno.h>' "$dest/t.c"
pcdir=$dest$prefix/lib/pkgconfig
flags=$(PKG_CONFIG_SYSROOT_DIR=$dest PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs libhpz)
# An --enable-asan libhpz needs its clients built the same way.
san=$(sed -n 's/^SAN_CFLAGS = //p' "$HPZ_BUILDDIR/Makefile")
if cc $san -o "$dest/t" "$dest/t.c" $flags && LD_LIBRARY_PATH=$dest$prefix/lib "$dest/t" | grep -q "not running"; then
	echo "ok   client builds with pkg-config libhpz and runs"; pass=$((pass + 1))
else
	echo "FAIL client against the installed libhpz"; fail=$((fail + 1))
fi
echo "install: $pass passed, $fail failed"
[ "$fail" = 0 ]
