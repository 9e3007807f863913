#!/bin/sh
''''exec "${WARDEN_PYTHON:-/usr/bin/python3}" "$0" "$@" # '''
"""`pip` inside Warden's sandboxes: installs from the pool's wheelhouse, fast.

(The first two lines are for sh and for Python both: sh runs this file with
the sandbox's Python - a template's own, $WARDEN_PYTHON, or Debian's - and
to Python the second line is a string.)

Sandboxes have no network. An operator can give a pool a wheelhouse, a host
directory of wheels bound read-only into its sandboxes and named by
$PIP_FIND_LINKS; packages install into a user site in the session's
workspace ($PYTHONUSERBASE, which the Python kernel keeps on sys.path). The
sandbox's environment configures Debian's pip the same way (PIP_NO_INDEX,
PIP_USER, ...), so `python3 -m pip` behaves alike, only slower.

This program is `pip` and `pip3` on the sandbox's PATH, so also what `!pip`
and `%pip` in a Python cell run. pip spends about a second of CPU starting
up; the common request, `pip install NAME[SPEC] ...` with wheels (and their
dependencies) from the wheelhouse, takes this program tens of
milliseconds, and so does the answer "Requirement already satisfied" or
"not in the wheelhouse". Everything else - other commands, options it does
not know, upgrades, wheels it will not unpack itself - goes to Debian's pip
unchanged, before anything is installed.

Output follows pip's wording, so that what models and agent frameworks look
for ("Successfully installed", "Requirement already satisfied") is there.
"""

import base64
import csv
import hashlib
import importlib.metadata
import importlib.util
import io
import os
import sys
import zipfile

# Options of `pip install` that the sandbox's environment already implies or
# that change nothing here; any other option goes to Debian's pip.
HARMLESS_OPTIONS = {
    "--user", "--no-index", "--no-cache-dir", "--disable-pip-version-check",
    "--no-warn-script-location", "--break-system-packages", "--no-input",
    "--no-color", "--progress-bar=off", "--root-user-action=ignore",
}
QUIET_OPTIONS = {"-q", "--quiet", "-qq", "-qqq"}
# .dist-info files this program writes itself rather than unpacks.
WRITTEN_HERE = {"RECORD", "RECORD.jws", "RECORD.p7s", "INSTALLER", "REQUESTED"}


class Fallback(Exception):
    """The request is beyond this program: Debian's pip takes it."""


class Failure(Exception):
    """pip would fail too: the message says why and what to do."""


def index_enabled():
    """Whether pip may use an index: a session with a network policy has
    PIP_NO_INDEX=0 (its way out is the egress proxy in $HTTPS_PROXY)."""
    return os.environ.get("PIP_NO_INDEX", "").strip().lower() in ("", "0", "false", "no", "off")


def main(argv):
    args = argv[1:]
    try:
        if index_enabled() and not wheelhouses():
            raise Fallback()   # nothing to do here: pip goes to its index
        request = parse_install(args)
        return Installer(request).run()
    except Fallback:
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable, "-m", "pip"] + args)
    except Failure as failure:
        sys.stderr.write("ERROR: %s\n" % failure)
        return 1


class Request:
    def __init__(self):
        self.requirements = []   # packaging Requirement objects, as given
        self.quiet = False


def parse_install(args):
    if not args or args[0] != "install":
        raise Fallback()
    request = Request()
    from packaging.requirements import InvalidRequirement, Requirement
    for arg in args[1:]:
        if arg in QUIET_OPTIONS:
            request.quiet = True
        elif arg in HARMLESS_OPTIONS:
            continue
        elif arg.startswith("-"):
            raise Fallback()           # -r, -e, -U, --target, --pre, ...
        else:
            try:
                requirement = Requirement(arg)
            except InvalidRequirement:
                raise Fallback()       # a path, a URL: pip's business
            if requirement.url or requirement.marker:
                raise Fallback()
            request.requirements.append(requirement)
    if not request.requirements:
        raise Fallback()               # pip says what is missing
    return request


# --------------------------------------------------------------------------
# The wheelhouse


class Wheel:
    def __init__(self, path, name, version, tag_rank):
        self.path = path
        self.name = name             # canonical
        self.version = version       # packaging Version
        self.tag_rank = tag_rank     # lower is a better match for this Python

    def __repr__(self):
        return os.path.basename(self.path)


def wheelhouses():
    """The directories of $PIP_FIND_LINKS (pip's syntax: whitespace-separated)."""
    links = os.environ.get("PIP_FIND_LINKS", "").split()
    return [link[len("file://"):] if link.startswith("file://") else link for link in links]


def scan_wheelhouses(directories):
    """{canonical name: [Wheel, ...]} of the wheels this Python can install;
    also the names of wheels it cannot, to explain a miss."""
    from packaging.tags import sys_tags
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    supported = {}
    for rank, tag in enumerate(sys_tags()):
        supported.setdefault(str(tag), rank)
    usable, unusable = {}, {}
    for directory in directories:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for file_name in names:
            if not file_name.endswith(".whl"):
                continue
            try:
                name, version, _, tags = parse_wheel_filename(file_name)
            except InvalidWheelFilename:
                continue
            ranks = [supported[str(t)] for t in tags if str(t) in supported]
            path = os.path.join(directory, file_name)
            if ranks:
                usable.setdefault(name, []).append(Wheel(path, name, version, min(ranks)))
            else:
                unusable.setdefault(name, []).append(file_name)
    return usable, unusable


# --------------------------------------------------------------------------
# Resolving


def canonical(name):
    from packaging.utils import canonicalize_name
    return canonicalize_name(name)


def installed(name):
    try:
        return importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def location(dist):
    return str(dist.locate_file("")).rstrip("/")


class Installer:
    def __init__(self, request):
        self.request = request
        self.houses = wheelhouses()
        self._scan = None
        self.plan = []               # (Wheel, dist-info dir, requested) in install order
        self.chosen = {}             # canonical name -> Wheel
        # Lines are held until the request is known to be this program's:
        # after a hand-over, pip's own output is the only output.
        self.held = []

    def say(self, text):
        if not self.request.quiet:
            self.held.append(text + "\n")

    def flush(self):
        sys.stdout.write("".join(self.held))
        sys.stdout.flush()
        self.held = []

    @property
    def scan(self):
        if self._scan is None:
            self._scan = scan_wheelhouses(self.houses)
        return self._scan

    def run(self):
        if self.houses and not self.request.quiet:
            self.say("Looking in links: %s" % ", ".join(self.houses))
        try:
            for requirement in self.request.requirements:
                self.resolve(requirement, parent=None)
        except Failure:
            self.flush()
            raise
        # Every wheel is vetted before the first file is written, so a
        # hand-over to pip never finds half an installation.
        site = user_site_packages()
        unpacks = [Unpack(wheel, info_dir, requested, site) for wheel, info_dir, requested in self.plan]
        if unpacks:
            self.say("Installing collected packages: %s" % ", ".join(u.wheel.name for u in unpacks))
        self.flush()
        for unpack in unpacks:
            unpack.install()
        if unpacks:
            self.say("Successfully installed %s" % " ".join(
                "%s-%s" % (u.wheel.name, u.wheel.version) for u in unpacks))
        self.flush()
        return 0

    def resolve(self, requirement, parent):
        name = canonical(requirement.name)
        spec = requirement.specifier
        origin = "" if parent is None else " (from %s)" % parent
        if name in self.chosen:
            if not spec.contains(self.chosen[name].version, prereleases=True):
                raise Fallback()       # conflicting requirements: pip's resolver
            return
        dist = installed(name)
        if dist is not None and spec.contains(dist.version, prereleases=True):
            self.say("Requirement already satisfied: %s in %s%s (%s)"
                     % (requirement, location(dist), origin, dist.version))
            return
        usable, unusable = self.scan
        candidates = sorted((w for w in usable.get(name, ()) if spec.contains(w.version, prereleases=True)),
                            key=lambda w: (w.version, -w.tag_rank), reverse=True)
        if dist is not None and candidates:
            raise Fallback()           # an upgrade: pip replaces the old version
        for wheel in candidates:
            info_dir, metadata = read_metadata(wheel)
            if not python_fits(metadata):
                continue
            self.chosen[name] = wheel
            self.say("Processing %s" % wheel.path)
            for dependency in dependencies(metadata, requirement.extras):
                self.resolve(dependency, parent="%s==%s" % (name, wheel.version))
            self.plan.append((wheel, info_dir, parent is None))
            return
        if dist is None and parent is None and not str(spec) and importable(requirement.name):
            self.say("Requirement already satisfied: %s (the module %s is importable here)"
                     % (requirement.name, requirement.name))
            return
        if index_enabled():
            raise Fallback()           # the index may have it: pip looks there
        raise Failure(self.not_found(requirement, dist, usable.get(name, ()), unusable.get(name, ()), parent))

    def not_found(self, requirement, dist, usable, unusable, parent):
        wanted = str(requirement) + ("" if parent is None else " (required by %s)" % parent)
        have = "" if dist is None else "; %s %s is installed, which does not match" % (dist.metadata["Name"], dist.version)
        if not self.houses:
            return ("No matching distribution found for %s%s. This sandbox has no network and its pool "
                    "has no wheelhouse: ask the operator to add one with this package's wheel "
                    "(pools[].wheelhouse in wardend's configuration)." % (wanted, have))
        houses = ", ".join(self.houses)
        if usable:
            versions = ", ".join(str(w.version) for w in sorted(usable, key=lambda w: w.version))
            why = "the wheelhouse %s has versions %s, none matching for this Python" % (houses, versions)
        elif unusable:
            why = ("the wheelhouse %s has %s, built for another Python or platform than this one "
                   "(CPython %d.%d, %s)" % (houses, ", ".join(unusable), sys.version_info[0],
                                            sys.version_info[1], os.uname().machine))
        else:
            why = "it is not in the wheelhouse %s" % houses
        return ("No matching distribution found for %s%s: %s, and this sandbox has no network. "
                "Ask the operator to add its wheel to the pool's wheelhouse." % (wanted, have, why))


def importable(name):
    if not name.isidentifier():
        return False
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def read_metadata(wheel):
    """(the .dist-info directory's name, its METADATA as an email Message)."""
    import email.parser
    with zipfile.ZipFile(wheel.path) as archive:
        info_dirs = {n.split("/", 1)[0] for n in archive.namelist() if n.split("/", 1)[0].endswith(".dist-info")}
        if len(info_dirs) != 1:
            raise Fallback()           # not a wheel this program understands
        info_dir = info_dirs.pop()
        text = archive.read(info_dir + "/METADATA").decode("utf-8", "replace")
    return info_dir, email.parser.Parser().parsestr(text, headersonly=True)


def python_fits(metadata):
    requires = metadata.get("Requires-Python")
    if not requires:
        return True
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    try:
        return SpecifierSet(requires).contains("%d.%d.%d" % sys.version_info[:3], prereleases=True)
    except InvalidSpecifier:
        return True


def dependencies(metadata, extras):
    from packaging.requirements import InvalidRequirement, Requirement
    for line in metadata.get_all("Requires-Dist") or ():
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            raise Fallback()
        if requirement.url:
            raise Fallback()
        if requirement.marker is not None:
            wanted = any(requirement.marker.evaluate({"extra": extra}) for extra in [""] + sorted(extras))
            if not wanted:
                continue
            requirement.marker = None
        yield requirement


# --------------------------------------------------------------------------
# Installing


def user_base():
    return os.environ.get("PYTHONUSERBASE") or os.path.expanduser("~/.local")


def user_site_packages():
    return os.path.join(user_base(), "lib", "python%d.%d" % sys.version_info[:2], "site-packages")


def record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class Unpack:
    """One wheel unpacked into the user scheme as pip does it: its files,
    console scripts, and a RECORD that lets `pip uninstall` remove them."""

    def __init__(self, wheel, info_dir, requested, site):
        self.wheel = wheel
        self.info_dir = info_dir
        self.requested = requested
        self.site = site
        self.base = user_base()
        self.scripts_dir = os.path.join(self.base, "bin")
        self.data_dir = info_dir[:-len(".dist-info")] + ".data"
        self.files = self._destinations()   # [(zip member name, destination)]

    def _destinations(self):
        targets = {"purelib": self.site, "platlib": self.site, "scripts": self.scripts_dir, "data": self.base}
        files = []
        with zipfile.ZipFile(self.wheel.path) as archive:
            for member in archive.infolist():
                name = member.filename
                parts = name.split("/")
                if name.endswith("/") or (parts[0] == self.info_dir and parts[-1] in WRITTEN_HERE):
                    continue
                if name.startswith("/") or ".." in parts or "\\" in name:
                    raise Failure("the wheel %s holds the unsafe path %r" % (self.wheel.path, name))
                if parts[0] == self.data_dir:
                    if len(parts) < 3 or parts[1] not in targets:
                        raise Fallback()   # headers, or something odd
                    destination = os.path.join(targets[parts[1]], *parts[2:])
                else:
                    destination = os.path.join(self.site, *parts)
                if os.path.lexists(destination):
                    raise Fallback()       # something is in the way: pip decides
                files.append((name, destination))
        return files

    def install(self):
        written = []
        try:
            with zipfile.ZipFile(self.wheel.path) as archive:
                for name, destination in self.files:
                    member = archive.getinfo(name)
                    data = archive.read(member)
                    if name.startswith(self.data_dir + "/scripts/") and data.startswith(b"#!python"):
                        data = b"#!" + sys.executable.encode() + data[len(b"#!python"):]
                    write_file(destination, data, executable=(member.external_attr >> 16) & 0o111)
                    written.append((destination, data))
            entry_points = os.path.join(self.site, self.info_dir, "entry_points.txt")
            if os.path.exists(entry_points):
                for script, data in console_scripts(entry_points, self.scripts_dir):
                    write_file(script, data, executable=True)
                    written.append((script, data))
            extra = [("INSTALLER", b"warden-pip\n")] + ([("REQUESTED", b"")] if self.requested else [])
            for name, data in extra:
                path = os.path.join(self.site, self.info_dir, name)
                write_file(path, data, executable=False)
                written.append((path, data))
            write_record(os.path.join(self.site, self.info_dir, "RECORD"), written, self.site)
        except OSError as exc:
            for path, _ in written:
                try:
                    os.unlink(path)
                except OSError:
                    pass
            raise Failure("could not install %s: %s (packages go to %s, in the session's workspace)"
                          % (self.wheel.name, exc, self.base))


def write_file(path, data, executable):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    if executable:
        os.chmod(path, 0o755)


def write_record(path, written, site):
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for file_path, data in written:
        writer.writerow([os.path.relpath(file_path, site), record_hash(data), len(data)])
    writer.writerow([os.path.relpath(path, site), "", ""])
    write_file(path, out.getvalue().encode("utf-8"), executable=False)


def console_scripts(entry_points_file, scripts_dir):
    import configparser
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str
    parser.read(entry_points_file, encoding="utf-8")
    if not parser.has_section("console_scripts"):
        return []
    scripts = []
    for name, target in parser.items("console_scripts"):
        module, _, attribute = target.partition(":")
        attribute = attribute.split("[", 1)[0].strip()
        if not attribute:
            continue
        text = ("#!%s\n# -*- coding: utf-8 -*-\nimport re\nimport sys\nfrom %s import %s\n"
                "if __name__ == '__main__':\n"
                "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
                "    sys.exit(%s())\n" % (sys.executable, module.strip(), attribute.split(".")[0], attribute))
        scripts.append((os.path.join(scripts_dir, name.strip()), text.encode("utf-8")))
    return scripts


if __name__ == "__main__":
    sys.exit(main(sys.argv))
