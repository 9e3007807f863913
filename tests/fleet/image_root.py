"""The root filesystem of the fleet test's container image, from Debian's
packages and the project's own .deb, with no registry and no Dockerfile:

  /usr/bin/python3 tests/fleet/image_root.py BUILD/deb/warden_*.deb OUT.tar [--cache DIR]

The packages are what the .deb's programs link to (its Depends, less the
Python libraries sandboxes import, which the test does not need) and the
interpreters and tools wardend and its entrypoint run (python3, bash, sh,
mount), with everything they depend on. Each is fetched from the Debian
mirror with `apt-get download` (cached in --cache) and unpacked with
dpkg-deb, the .deb last; the tar goes to `docker import`.
"""
import argparse
import pathlib
import re
import subprocess
import sys
import tarfile
import tempfile

SEEDS = ["python3.11", "python3.11-minimal", "libpython3.11", "bash", "dash", "coreutils", "mount", "grep",
         "libc-bin", "sed"]
# Never followed: what only package management, init or interactive use
# needs (the image runs no maintainer scripts and no init).
SKIP = {"dpkg", "debconf", "init-system-helpers", "perl-base", "adduser", "passwd", "systemd", "install-info",
        "debianutils", "sensible-utils", "lsb-base", "readline-common", "tzdata", "media-types", "python3",
        "libpam-modules", "libpam-runtime", "libpam0g", "login", "debconf-2.0", "cdebconf", "base-files",
        "usrmerge", "usr-is-merged", "libsystemd0", "systemd-sysv"}


def installed():
    """package -> (version, depends text, provides)."""
    out = subprocess.run(["dpkg-query", "-W", "-f", "${db:Status-Abbrev}\t${Package}\t${Version}\t${Pre-Depends}, "
                          "${Depends}\t${Provides}\n"], check=True, stdout=subprocess.PIPE, text=True).stdout
    packages, providers = {}, {}
    for line in out.splitlines():
        status, name, version, depends, provides = line.split("\t")
        if not status.startswith("ii"):
            continue
        packages[name] = (version, depends)
        for p in provides.split(","):
            p = p.strip().split(" ")[0]
            if p:
                providers.setdefault(p, name)
    return packages, providers


def closure(seeds, packages, providers):
    chosen, todo = set(), list(seeds)
    while todo:
        name = todo.pop()
        name = name.split(":")[0]
        if name in SKIP or name in chosen:
            continue
        if name not in packages:
            if name in providers:
                todo.append(providers[name])
                continue
            raise SystemExit("image_root: %s is not installed here (install it, or it cannot go into the image)" % name)
        chosen.add(name)
        for clause in packages[name][1].split(","):
            clause = clause.strip()
            if not clause:
                continue
            # "a (>= 1) | b": the first alternative that is installed.
            options = [re.sub(r"\s*\(.*?\)", "", o).strip().split(":")[0] for o in clause.split("|")]
            pick = next((o for o in options if o in packages), None) or next(
                (providers[o] for o in options if o in providers), None)
            if pick is None:
                raise SystemExit("image_root: nothing installed satisfies '%s' (for %s)" % (clause, name))
            todo.append(pick)
    return chosen


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("deb")
    parser.add_argument("out")
    parser.add_argument("--cache", default="/var/cache/warden-fleet-debs")
    args = parser.parse_args()
    deb = pathlib.Path(args.deb)
    fields = subprocess.run(["dpkg-deb", "-f", str(deb), "Depends"], check=True, stdout=subprocess.PIPE,
                            text=True).stdout
    # The libraries the programs link to: the lib* entries of Depends.
    libraries = [re.sub(r"\s*\(.*?\)", "", c.split("|")[0]).strip() for c in fields.split(",")]
    libraries = [n for n in libraries if n.startswith("lib")]
    packages, providers = installed()
    chosen = sorted(closure(SEEDS + libraries, packages, providers))
    cache = pathlib.Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    # The mirror's version of each (the one installed here may be gone from
    # it; a point release keeps the ABI), fetched once into the cache.
    def cached(name):
        found = sorted(cache.glob("%s_*.deb" % name))
        return found[-1] if found else None
    missing = [name for name in chosen if cached(name) is None]
    if missing:
        subprocess.run(["apt-get", "download", "-q"] + missing, check=True, cwd=cache)
    files = [cached(name) for name in chosen]
    with tempfile.TemporaryDirectory(prefix="warden-image-") as tmp:
        root = pathlib.Path(tmp) / "root"
        root.mkdir()
        # Debian 12's merged /usr: the top-level directories are links, and
        # unpacking keeps them links.
        (root / "usr").mkdir()
        for top in ("bin", "sbin", "lib", "lib64"):
            (root / "usr" / top).mkdir()
            (root / top).symlink_to("usr/" + top)
        for path in files + [deb]:
            unpack = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(path)], stdout=subprocess.PIPE)
            subprocess.run(["tar", "-x", "--keep-directory-symlink", "-C", str(root)], stdin=unpack.stdout,
                           check=True)
            if unpack.wait() != 0:
                raise SystemExit("image_root: dpkg-deb failed on %s" % path)
        for directory in ("etc", "tmp", "proc", "sys", "dev", "run", "var/lib/warden", "var/tmp", "root"):
            (root / directory).mkdir(parents=True, exist_ok=True)
        (root / "tmp").chmod(0o1777)
        (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")
        (root / "etc" / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
        # python3 is the package's link, which the python3 package (skipped:
        # it pulls in the tooling) would make.
        if not (root / "usr" / "bin" / "python3").exists():
            (root / "usr" / "bin" / "python3").symlink_to("python3.11")
        with tarfile.open(args.out, "w") as tar:
            tar.add(str(root), arcname=".")
    size = pathlib.Path(args.out).stat().st_size
    print("%s: %d packages and %s, %.0f MB" % (args.out, len(chosen), deb.name, size / 1e6))


if __name__ == "__main__":
    sys.exit(main())
