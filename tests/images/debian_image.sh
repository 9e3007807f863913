#!/bin/sh
# The Debian 12 image the template tests run in (docs/templates.md,
# "Tests"), made with Debian's mmdebstrap from the apt repositories this
# machine reaches, as an OCI image archive. Cached outside the build
# directory, keyed by this script (its package list and hooks): the ASan run
# and later runs reuse it. Prints the archive's path.
#
# The image holds Debian's python3 (with matplotlib and pip), node and bash,
# laid out unlike the host's runtime: a virtualenv in /opt/venv (a package
# of its own in it, warden_extra) first on PATH, so that `python3` there is
# /opt/venv/bin/python3. Two images share the one layer: "debian-venv" (that
# PATH) and "debian" (Debian's PATH, /usr/bin/python3).
#
# Usage: debian_image.sh [CACHE_DIR]   (default /var/cache/warden-tests)
set -eu

cache=${1:-/var/cache/warden-tests}
mkdir -p "$cache"
key=$(sha256sum "$0" | cut -c1-16)
out="$cache/debian-$key.tar"
exec 9>"$cache/debian.lock"
flock 9
if [ -s "$out" ]; then
  echo "$out"
  exit 0
fi

command -v mmdebstrap >/dev/null || {
  echo "debian_image.sh: mmdebstrap is missing: apt-get install mmdebstrap (make test-deps installs it)" >&2
  exit 1
}
work=$(mktemp -d "$cache/debian-build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# No recommends (they bring compilers and Boost), and the reference BLAS
# rather than OpenBLAS: the image stays at a few hundred MB.
packages=python3,python3-venv,python3-matplotlib,python3-pip,python3-packaging,libblas3,liblapack3,nodejs,bash,procps
# fonttools (matplotlib's) takes scipy | munkres, ufolib2 | defcon: the smaller ones.
packages=$packages,python3-munkres,python3-defcon,python3-unicodedata2
start=$(date +%s)
mmdebstrap --quiet --variant=minbase --include="$packages" \
  --aptopt='APT::Install-Recommends "false"' \
  --customize-hook='chroot "$1" python3 -m venv --system-site-packages /opt/venv' \
  --customize-hook='mkdir -p "$1/opt/venv/lib/python3.11/site-packages/warden_extra"' \
  --customize-hook='echo "WHERE = __file__" > "$1/opt/venv/lib/python3.11/site-packages/warden_extra/__init__.py"' \
  --customize-hook='rm -rf "$1/var/cache/apt" "$1/var/lib/apt/lists" "$1/usr/share/doc" "$1/usr/share/man"' \
  bookworm "$work/rootfs.tar" http://deb.debian.org/debian >&2
echo "debian_image.sh: mmdebstrap took $(( $(date +%s) - start )) s" >&2

/usr/bin/python3 - "$work" <<'PY'
import hashlib, json, os, sys
work = sys.argv[1]
layout = os.path.join(work, "layout")
blobs = os.path.join(layout, "blobs", "sha256")
os.makedirs(blobs)

def put(data):
    digest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(blobs, digest), "wb") as f:
        f.write(data)
    return "sha256:" + digest, len(data)

h = hashlib.sha256()
with open(os.path.join(work, "rootfs.tar"), "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
layer = "sha256:" + h.hexdigest()
layer_size = os.path.getsize(os.path.join(work, "rootfs.tar"))
os.rename(os.path.join(work, "rootfs.tar"), os.path.join(blobs, h.hexdigest()))

base_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
manifests = []
for ref, path in (("debian-venv", "/opt/venv/bin:" + base_path), ("debian", base_path)):
    config = {"architecture": "amd64", "os": "linux",
              "config": {"Env": ["PATH=" + path, "LANG=C.UTF-8", "IMAGE_GREETING=" + ref], "WorkingDir": "/"},
              "rootfs": {"type": "layers", "diff_ids": [layer]}}
    config_digest, config_size = put(json.dumps(config).encode())
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                           "digest": config_digest, "size": config_size},
                "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                            "digest": layer, "size": layer_size}]}
    manifest_digest, manifest_size = put(json.dumps(manifest).encode())
    manifests.append({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest_digest,
                      "size": manifest_size, "annotations": {"org.opencontainers.image.ref.name": ref}})
with open(os.path.join(layout, "oci-layout"), "w") as f:
    json.dump({"imageLayoutVersion": "1.0.0"}, f)
with open(os.path.join(layout, "index.json"), "w") as f:
    json.dump({"schemaVersion": 2, "manifests": manifests}, f)
PY

tar -C "$work/layout" -cf "$work/image.tar" .
mv "$work/image.tar" "$out"
echo "$out"
