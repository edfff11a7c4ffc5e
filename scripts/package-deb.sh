#!/usr/bin/env bash
# Build punctual's Debian package (issue 28): the binary, libpunctual.so with punctual.h and
# punctual.pc, man pages and bash/zsh/fish completions generated from the command line's
# definition, the result document's JSON Schema under /usr/share/punctual, and contrib/.
#
#   scripts/package-deb.sh                 # cargo build --release, then target/debian/punctual_<v>_<arch>.deb
#   scripts/package-deb.sh --bin-dir DIR   # package binaries already built in DIR (no build, no strip)
#   options: --out DIR (default target/debian), --fast (gzip -1 instead of xz)
#
# dpkg-deb rather than cargo-deb: cargo-deb (3.8, Rust 1.85) would fit the MSRV, but it refuses to
# package a dev-profile build ("will be a hard error"), so the test could not package the binaries
# `cargo test` already built without a release build of the workspace (minutes on 2 CPUs); and the
# man pages, completions and punctual.pc come from running the built binary, which cargo-deb does
# not do, so a script was needed anyway. dpkg-deb is on every Debian system.
set -euo pipefail
cd "$(dirname "$0")/.."

bin_dir=""
out=target/debian
compress=(-Zxz)
while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) bin_dir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --fast) compress=(-Zgzip -z1); shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "package-deb.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

strip=1
if [ -z "$bin_dir" ]; then
  cargo build --release --locked -p punctual -p punctual-libpunctual
  bin_dir=target/release
else
  strip=0
fi
exe=$bin_dir/punctual
lib=""
for l in "$bin_dir/libpunctual.so" "$bin_dir/deps/libpunctual.so"; do
  if [ -f "$l" ]; then lib=$l; break; fi
done
[ -x "$exe" ] || { echo "package-deb.sh: no punctual binary in $bin_dir" >&2; exit 2; }
[ -n "$lib" ] || {
  echo "package-deb.sh: no libpunctual.so in $bin_dir (cargo build -p punctual-libpunctual)" >&2
  exit 2
}

# "punctual 0.1.0 (commit 0123abcd4567)"
read -r _ version _ commit < <("$exe" --version)
commit=${commit%)}
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/punctual_${version}_$arch

install -D -m 755 "$exe" "$root/usr/bin/punctual"
install -D -m 644 "$lib" "$root/usr/lib/libpunctual.so"
if [ "$strip" = 1 ]; then
  strip --strip-unneeded "$root/usr/bin/punctual" "$root/usr/lib/libpunctual.so"
fi
install -D -m 644 crates/libpunctual/include/punctual.h "$root/usr/include/punctual.h"
mkdir -p "$root/usr/lib/pkgconfig"
cat > "$root/usr/lib/pkgconfig/punctual.pc" <<EOF
prefix=/usr
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: punctual
Description: periodic tasks with punctual's accuracy
Version: $version
Libs: -L\${libdir} -lpunctual
Cflags: -I\${includedir}
EOF

man=$root/usr/share/man/man1
"$exe" __man "$man" > /dev/null
gzip -9n "$man"/*.1
install -d "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
  "$root/usr/share/fish/vendor_completions.d"
"$exe" __completions bash > "$root/usr/share/bash-completion/completions/punctual"
"$exe" __completions zsh > "$root/usr/share/zsh/vendor-completions/_punctual"
"$exe" __completions fish > "$root/usr/share/fish/vendor_completions.d/punctual.fish"

share=$root/usr/share/punctual
install -D -m 644 crates/result/schema/punctual.result-1.schema.json \
  "$share/punctual.result-1.schema.json"
install -D -m 644 examples/c/periodic.c "$share/examples/c/periodic.c"
if [ -d contrib ]; then
  cp -r contrib "$share/contrib"
  # systemd units go where systemd looks for a package's units.
  for u in contrib/systemd/*.service contrib/systemd/*.timer; do
    [ -f "$u" ] && install -D -m 644 "$u" "$root/usr/lib/systemd/system/$(basename "$u")"
  done
fi

doc=$root/usr/share/doc/punctual
install -d "$doc"
cp README.md "$doc/"
cp docs/*.md "$doc/"
cat > "$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: punctual
Source: $(sed -n 's/^repository = "\(.*\)"/\1/p' Cargo.toml)

Files: *
Copyright: the punctual developers
License: MIT or Apache-2.0
EOF
find "$root" -type d -exec chmod 755 {} +

mkdir -p "$root/DEBIAN"
cat > "$root/DEBIAN/control" <<EOF
Package: punctual
Version: $version
Architecture: $arch
Maintainer: punctual developers <punctual@example.invalid>
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: libc6
Suggests: rt-tests, rt-app
Section: utils
Priority: optional
Homepage: $(sed -n 's/^repository = "\(.*\)"/\1/p' Cargo.toml)
Description: make commodity Linux punctual, and show how punctual it is
 Timer and dispatch latency (cyclictest-class, with a drop-in: punctual
 cyclictest), periodic plans dispatched from user space (rt-app task files
 read too), kernel traces, tick-scheduler simulation, traffic replay, and a
 results store with reports and comparisons.
 .
 Built from commit $commit.
EOF

mkdir -p "$out"
deb=$out/punctual_${version}_$arch.deb
dpkg-deb --root-owner-group "${compress[@]}" --build "$root" "$deb" > /dev/null
echo "$deb"
