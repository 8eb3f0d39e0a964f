"""Stack traces in pasted text, in the formats of each language's runtime and debugger.

A frame says which function ran in which file at which line; for a failure it is the best
evidence a question can carry (gitrag.query.ranking.pipeline.frame_sites maps it to the
definition it ran in). :func:`frames` reads, line by line:

- Python: ``File "x.py", line 12, in f``;
- Go panics and ``runtime/debug`` stacks: a function line ``pkg.(*T).Method(...)`` then
  ``\t/path/file.go:123 +0x1d`` (a module cache path ``.../mod/github.com/o/r@v1.2.3/x.go``
  is read from the module root, which is the repository's: ``x.go``);
- Rust backtraces: ``  12: crate::module::function`` then ``at ./src/x.rs:12:5``, and a
  panic's ``panicked at src/x.rs:12:5``;
- Java, Kotlin, Scala: ``at com.pkg.Class.method(Class.java:12)`` (the package gives the
  folders: ``com/pkg/Class.java``);
- JavaScript and TypeScript (V8, Node): ``at fn (/path/file.js:1:2)``, ``at /path/file.js:1:2``;
- C and C++: gdb's ``#1  0x... in func (args) at file.c:12`` and the sanitizers'
  ``#0 0x4f5 in func /path/file.c:12:3``.

Frames are returned outermost first, whatever order the runtime prints (Python prints
the innermost call last, the others first). Linear in the text: one pass over its lines,
each tried only against the formats its first characters allow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PY_FRAME = re.compile(r'File "([^"\n]+)", line (\d+)(?:, in ([\w<>.$]+))?')
_GO_LOC = re.compile(r"^\s+(/?[^\s:]+\.go):(\d+)(?: \+0x[0-9a-fA-F]+)?\s*$")
_GO_FUNC = re.compile(r"^([\w./*()\[\]-]+?)\((?:[^()]*)\)\s*$")
_GO_MODULE = re.compile(r"^.*?/[^/@\s]+@v[^/\s]*/")  # .../pkg/mod/github.com/o/r@v1.2.3/
_RUST_FUNC = re.compile(r"^\s*\d+:\s+(?:0x[0-9a-fA-F]+ - )?([\w:<>$. {}]+?)(?:::h[0-9a-f]{16})?\s*$")
_RUST_LOC = re.compile(r"^\s+at ([^\s:]+\.rs):(\d+)(?::\d+)?\s*$")
_RUST_PANIC = re.compile(r"panicked at (?:'.*?', |\".*?\", )?([^\s:']+\.rs):(\d+)(?::\d+)?")
_JAVA = re.compile(r"^\s*at ((?:[\w$]+\.)+)([\w$<>]+)\(([\w$]+\.(?:java|kt|scala|groovy)):(\d+)\)")
_JS = re.compile(r"^\s*at (?:async )?(?:((?:new )?[^\s()]+) )?\(?((?:file://)?[^\s()]+?\.(?:[cm]?[jt]sx?|vue)):(\d+)"
                 r"(?::\d+)?\)?\s*$")
_GDB = re.compile(r"^#\d+\s+(?:0x[0-9a-fA-F]+ in )?([\w:~<>]+) \(.*?\) at ([^\s:]+):(\d+)")
_SAN = re.compile(r"^\s*#\d+ 0x[0-9a-fA-F]+ in ([\w:~<>]+)(?:\(.*?\))? ([^\s:()]+\.\w+):(\d+)(?::\d+)?")


@dataclass(frozen=True)
class Frame:
    """One traceback frame: the file as printed, its line, the function (may be "")."""

    path: str
    line: int
    function: str


def frames(text: str) -> list[Frame]:
    """Every frame in ``text`` (see the module docstring), outermost first."""
    python: list[Frame] = []
    others: list[Frame] = []  # printed innermost first
    previous = ""
    for line in text.splitlines():
        frame = _python(line) if 'File "' in line else None
        if frame is not None:
            python.append(frame)
        else:
            frame = _other(line, previous)
            if frame is not None:
                others.append(frame)
        previous = line
    return python + others[::-1]


def is_frame_line(line: str) -> bool:
    """True when ``line`` is (the location line of) a frame in one of the formats."""
    return ('File "' in line and PY_FRAME.search(line) is not None) or _other(line, "") is not None


def has_frames(text: str) -> bool:
    """True when ``text`` holds at least one frame (cheap prefilter, then a line scan)."""
    if PY_FRAME.search(text):
        return True
    if not any(mark in text for mark in (".go:", ".rs:", ".java:", ".kt:", ".scala:", ".js:", ".ts:", ".jsx:",
                                         ".tsx:", ".mjs:", ".cjs:", "#0 ", "#1 ")):
        return False
    return any(_other(line, "") is not None for line in text.splitlines())


def _python(line: str) -> Frame | None:
    m = PY_FRAME.search(line)
    return Frame(m.group(1), int(m.group(2)), m.group(3) or "") if m else None


def _last(name: str, seps: str) -> str:
    for sep in seps.split():
        name = name.rsplit(sep, 1)[-1]
    return name


def _other(line: str, previous: str) -> Frame | None:
    """A frame of a non-Python format whose location is on ``line`` (the function may be
    on ``previous``, as Go and Rust print it)."""
    s = line.lstrip()
    if not s:
        return None
    if s.startswith("at "):
        m = _JAVA.match(line)
        if m:
            segments = m.group(1).rstrip(".").split(".")
            package = [x for x in segments if x[:1].islower()]
            return Frame("/".join([*package, m.group(3)]), int(m.group(4)), m.group(2))
        m = _RUST_LOC.match(line)
        if m:
            fm = _RUST_FUNC.match(previous)
            func = _last(fm.group(1), "::") if fm else ""
            return Frame(m.group(1), int(m.group(2)), "" if "{" in func or "<" in func else func)
        m = _JS.match(line)
        if m:
            func = (m.group(1) or "").removeprefix("new ")
            path = m.group(2).removeprefix("file://")
            return Frame(path, int(m.group(3)), _last(func, ".") if func else "")
        return None
    if s.startswith("#"):
        m = _GDB.match(s) or _SAN.match(s)
        if m:
            return Frame(m.group(2), int(m.group(3)), _last(m.group(1), "::"))
        return None
    if ".go:" in line:
        m = _GO_LOC.match(line)
        if m:
            fm = _GO_FUNC.match(previous.strip())
            func = _last(fm.group(1), ".") if fm else ""
            return Frame(_GO_MODULE.sub("", m.group(1)), int(m.group(2)), func.strip("()*"))
        return None
    if "panicked at" in line:
        m = _RUST_PANIC.search(line)
        if m:
            return Frame(m.group(1), int(m.group(2)), "")
    return None
