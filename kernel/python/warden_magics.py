"""IPython's line syntax in Warden's Python cells: `!cmd`, `x = !cmd`, `%pip`.

Models write notebook code, and E2B, smolagents and most notebooks they
imitate rely on IPython's escapes. The kernel (warden_kernel.py) loads this
module the first time a cell does not compile as Python, and compiles
`transform(source)` instead when that finds such lines:

* `!cmd` runs cmd in the sandbox's shell (bash), its output streaming into
  the cell as it is written; `_exit_code` holds its status afterwards;
* `x = !cmd` (also `x = !!cmd`, and `!!cmd` as an expression) captures the
  output, stderr included, as a list of lines (`SList`: `.s`, `.n`, `.l`);
* `%pip ARGS` runs `pip ARGS` in the shell, which is Warden's pip
  (kernel/bin/warden_pip.py): it installs from the pool's wheelhouse into
  the session's user site, which `refresh_imports` keeps importable;
* `%matplotlib inline` is accepted: it asks for what the kernel always does;
* any other `%magic` or `%%magic` raises UsageError when its line runs.

IPython's rules, which models rely on: `{expr}` and `$name` in a command
expand from the caller's variables (the command runs unexpanded when that
fails, so `$HOME` and awk's `{print $1}` reach the shell), and only a line
that begins a statement is an escape. Statements are found with tokenize,
so `x != 1`, `"!foo"`, and lines inside brackets or triple-quoted strings
stay Python. Each escape becomes one call on the same line, so line
numbers in tracebacks stay the cell's.
"""

import ast
import builtins
import importlib
import os
import re
import string
import subprocess
import sys
import tokenize

SHELL = "/bin/bash"
SYSTEM = "__warden_system__"
GETOUTPUT = "__warden_getoutput__"
MAGIC = "__warden_magic__"
_refresh = None                 # set by install(): the kernel's import refresh


class UsageError(Exception):
    """A magic Warden does not support (IPython's name for the error)."""


# Tracebacks end "UsageError: ...", as IPython's do, not "_warden_magics.UsageError".
UsageError.__module__ = "builtins"


class SList(list):
    """The lines a `x = !cmd` captured, like IPython's SList."""

    @property
    def l(self):
        return list(self)

    @property
    def s(self):
        return " ".join(self)

    @property
    def n(self):
        return "\n".join(self)

    nlstr = n
    spstr = s

    def grep(self, pattern, prune=False):
        """The lines matching (with prune=True: not matching) a regex."""
        match = re.compile(pattern).search
        return SList(line for line in self if bool(match(line)) != prune)


def install(refresh_imports):
    """Makes the helpers that transformed cells call visible everywhere.
    `refresh_imports` is called after every shell command (a pip install
    may have added modules)."""
    global _refresh
    _refresh = refresh_imports
    setattr(builtins, SYSTEM, system)
    setattr(builtins, GETOUTPUT, getoutput)
    setattr(builtins, MAGIC, magic)


# --------------------------------------------------------------------------
# Finding the escapes


def transform(source):
    """The cell with its escape lines rewritten as calls, or None if it has
    none (then its SyntaxError is a real one)."""
    lines = source.split("\n")
    out = list(lines)
    found = False
    i = 0
    while i < len(lines):
        line = lines[i]
        body = line.lstrip()
        indent = line[:len(line) - len(body)]
        if body.startswith(("!", "%")) or _assignment(body) is not None:
            end = i + 1
            while lines[end - 1].endswith("\\") and end < len(lines):
                end += 1        # a backslash continues an escape line, as in IPython
            text = "\n".join(lines[i:end])[len(indent):]
            call = _call(text)
            if call is not None:
                if body.startswith("%%"):
                    end = len(lines)    # a cell magic's body is the rest of the cell
                out[i] = indent + call
                for j in range(i + 1, end):
                    out[j] = ""
                found = True
                i = end
                continue
        i = _statement_end(lines, i)
    return "\n".join(out) if found else None


def _call(text):
    """The Python call for one escape line (text without its indentation)."""
    target = _assignment(text)
    if target is not None:
        lhs, rhs = target
        value = _value(rhs)
        return None if value is None else "%s = %s" % (lhs, value)
    if text.startswith("!!"):
        return "%s(%r)" % (GETOUTPUT, text[2:])
    if text.startswith("!"):
        return "%s(%r)" % (SYSTEM, text[1:])
    return _value(text)


def _value(text):
    if text.startswith("!"):
        return "%s(%r)" % (GETOUTPUT, text.lstrip("!"))
    match = re.match(r"%(%?)([A-Za-z_]\w*)(.*)\Z", text, re.S)
    if match is None:
        return None
    cell, name, args = match.groups()
    return "%s(%r, %r, %r)" % (MAGIC, name, args.strip(), bool(cell))


def _assignment(text):
    """(target, escape) for `target = !cmd` or `target = %magic`, else None."""
    for match in re.finditer(r"=\s*(?=[!%])", text):
        lhs = text[:match.start()].rstrip()
        if not lhs or lhs[-1] in "=!<>+-*/%&|^@:":
            continue
        try:
            tree = ast.parse(lhs + " = None")
        except SyntaxError:
            continue
        if len(tree.body) == 1 and isinstance(tree.body[0], ast.Assign):
            return lhs, text[match.end():]
    return None


def _statement_end(lines, start):
    """Index of the line after the statement that begins at lines[start]."""
    consumed = 0
    depth = 0

    def readline():
        nonlocal consumed
        if start + consumed >= len(lines):
            return ""
        consumed += 1
        return lines[start + consumed - 1] + "\n"

    try:
        for token in tokenize.generate_tokens(readline):
            if token.type == tokenize.OP and token.string in "([{":
                depth += 1
            elif token.type == tokenize.OP and token.string in ")]}":
                depth = max(0, depth - 1)
            elif token.type == tokenize.NEWLINE or (token.type == tokenize.NL and depth == 0):
                return start + token.end[0]
            elif token.type == tokenize.ENDMARKER:
                break
    except (tokenize.TokenError, SyntaxError):
        pass            # an unterminated string or bracket runs to the end
    return len(lines)


# --------------------------------------------------------------------------
# Running them


class _DollarFormatter(string.Formatter):
    """IPython's var_expand: `{expr}` is evaluated, `$name` / `$a.b` looked
    up (`$$` is a literal `$`), with `$` inside single quotes left alone."""

    _dollar = re.compile(r"(.*?)\$(\$?[\w\.]+)(?=([^']*'[^']*')*[^']*$)", re.S)

    def parse(self, text):
        for literal, field, spec, conversion in string.Formatter.parse(self, text):
            continue_from = 0
            pending = ""
            for match in self._dollar.finditer(literal):
                before, name = match.group(1, 2)
                if name.startswith("$"):
                    pending += before + name
                else:
                    yield pending + before, name, "", None
                    pending = ""
                continue_from = match.end()
            yield pending + literal[continue_from:], field, spec, conversion

    def vformat(self, text, args, namespace):
        out = []
        for literal, field, spec, conversion in self.parse(text):
            out.append(literal)
            if field is None:
                continue
            if spec:
                field = field + ":" + spec     # slices, as IPython allows
            value = self.convert_field(eval(field, dict(namespace)), conversion)
            out.append(self.format_field(value, ""))
        return "".join(out)


def _expand(command, frame):
    namespace = dict(frame.f_globals)
    namespace.update(frame.f_locals)
    try:
        return _DollarFormatter().vformat(command, (), namespace)
    except Exception:
        return command


def system(command, _depth=1):
    """`!command`: runs it in the shell; its output goes where the cell's does."""
    frame = sys._getframe(_depth)
    command = _expand(command, frame)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    if _writes_to(sys.stdout, 1) and _writes_to(sys.stderr, 2):
        # Straight onto the kernel's fds: streamed as the command writes.
        status = subprocess.run([SHELL, "-c", command], stdin=subprocess.DEVNULL).returncode
    else:
        # The cell redirected sys.stdout/sys.stderr: copy into those.
        with subprocess.Popen([SHELL, "-c", command], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as child:
            for chunk in iter(lambda: child.stdout.read1(65536), b""):
                sys.stdout.write(chunk.decode("utf-8", "replace"))
            status = child.wait()
    frame.f_globals["_exit_code"] = status
    _refresh()


def getoutput(command, _depth=1):
    """`x = !command`: its output (stderr included) as a list of lines."""
    frame = sys._getframe(_depth)
    command = _expand(command, frame)
    done = subprocess.run([SHELL, "-c", command], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    frame.f_globals["_exit_code"] = done.returncode
    _refresh()
    return SList(done.stdout.decode("utf-8", "replace").splitlines())


def magic(name, args, cell=False):
    """`%name args`: %pip and `%matplotlib inline`; anything else is refused."""
    if cell:
        raise UsageError(
            "Cell magic `%%%%%s` is not supported: Warden runs Python cells, with `!command` "
            "lines for the shell (a bash session runs whole scripts)" % name)
    if name == "pip":
        return system("pip " + args, _depth=2)
    if name == "matplotlib" and args in ("", "inline"):
        return None     # figures are always shown inline
    raise UsageError(
        "Line magic function `%%%s` is not supported: Warden runs Python cells with "
        "`!command`, `x = !command` and `%%pip` from IPython's syntax; write the rest as "
        "Python" % name)


def _writes_to(stream, fd):
    try:
        return stream.fileno() == fd
    except Exception:
        return False
