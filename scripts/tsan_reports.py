#!/usr/bin/env python3
"""Sorts ThreadSanitizer reports into ours and gRPC's own hand-offs.

    scripts/tsan_reports.py LOG...

Debian's libgrpc is not instrumented, but the header code of gRPC's C++ API
(grpcpp) is compiled into our programs, and it is. When libgrpc hands a
call's objects from one of its threads to another (a completion queue tag, a
closure on its executor, a reference count dropped inside the library), TSan
sees the header code's accesses on both threads and not the hand-off between
them, and reports a race that is gRPC's alone. Such a report is recognised by
all three of:

  - it is a data race;
  - on both sides, the access is made by gRPC's code: the first frame that is
    not the C++ standard library's (std::, /usr/include/c++/) is a grpc::
    function;
  - the memory is gRPC's: a heap block gRPC allocated (gpr_malloc, its call
    arenas).

One more hand-off is gRPC's though the memory is ours: a reactor we
allocate and return from a method handler. gRPC's base-class constructor
(grpc::ServerWriteReactor::ServerWriteReactor, ...) writes its fields, our
handler returns it, and libgrpc calls it back on another thread (reading
them in gRPC's code). That report has both accesses gRPC's and one of them
is a gRPC reactor's constructor; the rest of the construction (ours) ends
before the handler returns, so nothing of ours can race there.

A race where either access is our code's, or on memory we allocated other
than such a reactor, is ours, as is every other kind of report. This prints a line for each of
gRPC's and every other report in full, and exits 1 if there is any of ours.
docs/security.md "Sanitizers".
"""
import re
import sys

STD_FILE = "/usr/include/c++/"
# grpc::ServerWriteReactor::ServerWriteReactor, grpc::ClientBidiReactor::ClientBidiReactor, ...
REACTOR_CONSTRUCTOR = re.compile(r"^grpc::(?P<cls>(Server|Client)\w*Reactor)::(?P=cls)$")
FRAME = re.compile(r"^\s+#\d+ (?P<function>.*?) (?P<file>\S+) \((?P<module>[^)]*)\)$")


def frames(lines):
    out = []
    for line in lines:
        m = FRAME.match(line)
        if not m:
            break
        out.append((m.group("function"), m.group("file")))
    return out


def sections(report):
    """The report's sections: a heading line (unindented past two spaces) and its frames."""
    result = []
    lines = report.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("  ") and not line.startswith("    "):
            result.append((line.strip(), frames(lines[i + 1:])))
    return result


def qualified_name(function):
    """'void grpc::internal::CatchingCallback<...>(...)' -> 'grpc::internal::CatchingCallback'."""
    while True:
        stripped = re.sub(r"<[^<>]*>", "", function)
        if stripped == function:
            break
        function = stripped
    words = function.split("(")[0].split()
    return words[-1] if words else ""


def first_own_frame(stack):
    """The first frame that is not the C++ standard library's, by file or by name."""
    for function, file in stack:
        name = qualified_name(function)
        if not file.startswith(STD_FILE) and not name.startswith(("std::", "__gnu_cxx::")):
            return name
    return ""


def is_grpc_handoff(report):
    if "WARNING: ThreadSanitizer: data race" not in report:
        return None
    accesses = []
    location = None
    for heading, stack in sections(report):
        if re.match(r"(Previous )?(Atomic )?(read|write|Read|Write) of size", heading):
            accesses.append(first_own_frame(stack))
        elif heading.startswith("Location is heap block"):
            location = stack
    if len(accesses) != 2 or not all(a.startswith("grpc::") for a in accesses):
        return None
    if not location:
        return None
    if not any(function == "gpr_malloc" for function, _ in location) and \
            not any(REACTOR_CONSTRUCTOR.match(a) for a in accesses):
        return None
    return accesses


def main(paths):
    ours = 0
    for path in paths:
        text = open(path, errors="replace").read()
        for report in re.split(r"^==================$", text, flags=re.M):
            if "ThreadSanitizer" not in report or "WARNING:" not in report:
                continue
            handoff = is_grpc_handoff(report)
            if handoff:
                print(f"{path}: gRPC's own hand-off, not ours: {handoff[0]} / {handoff[1]}")
            else:
                ours += 1
                print(f"==== sanitizer report {path}\n{report.strip()}\n")
    return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
