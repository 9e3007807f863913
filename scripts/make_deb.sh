#!/bin/bash
# Builds warden_<version>_amd64.deb from a build tree: `make install` staged
# under a directory with PREFIX=/usr, man pages made from each program's
# --help (help2man), the Debian maintainer scripts in deploy/debian/, and the
# Depends line from dpkg-shlibdeps plus the runtimes the sandboxes use.
# Nothing is bundled: every library comes from Debian.
#
#   scripts/make_deb.sh BUILD_DIR OUT_DIR    prints the .deb's path
#
# WARDEN_DEB_COMPRESSION=none packs it uncompressed (tests/deb_test.sh does
# in a sanitizer build); the default is xz -6, what ships.
set -euo pipefail

build_dir=$(realpath "${1:?usage: make_deb.sh BUILD_DIR OUT_DIR}")
out_dir=$(realpath -m "${2:?usage: make_deb.sh BUILD_DIR OUT_DIR}")
source_dir=$(realpath "$(dirname "$0")/..")
cd "$source_dir"

version=$(sed -n 's/^project(warden VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
[ -n "$version" ] || { echo "make_deb: no version in CMakeLists.txt's project()" >&2; exit 1; }
arch=$(dpkg --print-architecture)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage="$work/root"

make --no-print-directory install DESTDIR="$stage" PREFIX=/usr BUILD_DIR="$build_dir" >/dev/null

# Debug information stays in the build tree: the package ships the
# programs stripped, as Debian does.
for f in "$stage"/usr/bin/*; do
  [ -L "$f" ] || strip --strip-unneeded --remove-section=.comment --remove-section=.note "$f"
done

# The packaged configuration lets the `warden` group use the socket.
config="$stage/etc/warden/wardend.json"
sed -i 's|"socket_group": ""|"socket_group": "warden"|' "$config"
grep -q '"socket_group": "warden"' "$config" ||
  { echo "make_deb: deploy/wardend.json has no socket_group key to set" >&2; exit 1; }

# Man pages from the --help texts, so they never disagree with the programs.
man1="$stage/usr/share/man/man1"
install -d -m 0755 "$man1"
declare -A summary=(
  [wardend]="Warden's sandbox daemon for model-written code"
  [warden]="command-line client of wardend"
  [warden-run]="run one program in a fresh Warden sandbox"
  [warden-gateway]="the front door of a fleet of wardend nodes"
)
for program in wardend warden warden-run warden-gateway; do
  help2man --no-info --no-discard-stderr --version-string="$version" \
    --name="${summary[$program]}" "$build_dir/bin/$program" | gzip -9n > "$man1/$program.1.gz"
done

# Debian's copyright file and the changelog a package's docs must hold.
doc="$stage/usr/share/doc/warden"
cat > "$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: warden
Source: the Warden repository

Files: *
Copyright: the Warden authors
License: see the repository
EOF
printf 'warden (%s) unstable; urgency=medium\n\n  * Built from the repository.\n\n -- Warden <warden@localhost>  %s\n' \
  "$version" "$(date -R -d @"${SOURCE_DATE_EPOCH:-0}")" | gzip -9n > "$doc/changelog.gz"

# Shared libraries from dpkg-shlibdeps (it wants a debian/control to read).
mkdir -p "$work/shlibs/debian"
printf 'Source: warden\n\nPackage: warden\nArchitecture: any\n' > "$work/shlibs/debian/control"
binaries=()
for f in "$stage"/usr/bin/*; do [ -L "$f" ] || binaries+=("$f"); done
shlibs=$(cd "$work/shlibs" && dpkg-shlibdeps -O --ignore-missing-info -e "${binaries[@]}" 2>/dev/null |
  sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || { echo "make_deb: dpkg-shlibdeps found no libraries" >&2; exit 1; }
# What sandboxes run: the interpreters and the Python runtime (the
# Makefile's RUNTIME_PACKAGES).
runtime="python3, nodejs, bash"
for package in $(make --no-print-directory -s runtime-packages); do runtime+=", $package"; done
# TypeScript, R and Java sessions need their interpreters; without them a
# session in that language fails to start and says which package to install.
languages=$(make --no-print-directory -s language-packages | sed 's/ /, /g')
# `warden template build` runs buildah; without it a build is refused and
# says which package to install.
for package in $(make --no-print-directory -s feature-packages); do languages+=", $package"; done

install -d -m 0755 "$stage/DEBIAN"
cat > "$stage/DEBIAN/control" <<EOF
Package: warden
Version: $version
Architecture: $arch
Maintainer: Warden <warden@localhost>
Section: admin
Priority: optional
Installed-Size: $(du -sk --exclude=DEBIAN "$stage" | cut -f1)
Depends: $shlibs, $runtime, adduser
Recommends: $languages
Description: sandbox daemon for model-written code
 wardend runs untrusted, LLM-generated Python, JavaScript and bash in
 isolated sandboxes (user, pid, mount, net, ipc, uts and cgroup namespaces,
 a read-only root, seccomp, cgroup limits, no network) behind a gRPC API,
 with live sessions, warm pools, a code agent, and MCP, E2B and Jupyter
 Kernel Gateway fronts. The service is installed but neither enabled nor
 started; see /usr/share/doc/warden/operations.md.
EOF
echo /etc/warden/wardend.json > "$stage/DEBIAN/conffiles"
for script in postinst prerm postrm; do
  install -m 0755 "deploy/debian/$script" "$stage/DEBIAN/$script"
done

mkdir -p "$out_dir"
deb="$out_dir/warden_${version}_${arch}.deb"
case "${WARDEN_DEB_COMPRESSION:-xz}" in
  xz) compression=(-Zxz -z6) ;;
  none) compression=(-Znone) ;;
  *) echo "make_deb: WARDEN_DEB_COMPRESSION is xz (the default) or none, not '$WARDEN_DEB_COMPRESSION'" >&2; exit 1 ;;
esac
dpkg-deb --root-owner-group "${compression[@]}" --build "$stage" "$deb" >/dev/null
echo "$deb"
