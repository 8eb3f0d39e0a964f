"""Python modules a pasted issue imports: the subsystem the report is about.

A bug report's reproduction imports what it uses (``from sympy.physics.units.systems.si
import SI``, ``import astropy.io.fits``). Python's import system maps a dotted module name
onto the package tree (``a.b.c`` is ``a/b/c.py`` or ``a/b/c/__init__.py``), so those names
point at the files and folders of the code being exercised. On the localization sets the
Python misses were mostly the wrong subsystem (a central module such as
``sympy/core/numbers.py`` whose words every issue shares), not the wrong neighbour, which
is what this evidence separates. The fix is often not in the module imported (the API entry
point) but near it, so the gain falls off with distance in the package tree:

    gain = MODULE_BOOST x top x (shared - 1) / (depth - 1)

for a candidate whose path shares ``shared`` leading package segments with a named module
of ``depth`` segments (the project's top package does not count: every file shares it; a
one-segment name like ``from sympy import *`` names nothing). The best named module counts
for each candidate. Weaker than a file a traceback or the text names (gitrag.query.ranking
.stages.NAMED_FILE_BOOST, 1.0): an import says what the reporter used, a frame where it failed.
Stage ``modules``; only for pasted text (long, or several lines), where reproductions are.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import PurePosixPath

from gitrag.query.ranking.query import Query
from gitrag.query.ranking.stages import Candidate, is_pasted, top_score

MODULE_BOOST = 0.5
MAX_NAMES = 32  # dotted names tried per question (text order): bounds the lookups of a 500 KB log
_FROM = re.compile(r"^\s*(?:>>>\s*|\.\.\.\s*|In \[\d+\]:\s*)?from\s+([A-Za-z_][\w.]*)\s+import\s+\(?\s*([\w, ]+)",
                   re.M)
_IMPORT = re.compile(r"^\s*(?:>>>\s*|\.\.\.\s*|In \[\d+\]:\s*)?import\s+([A-Za-z_][\w.]*(?:\s+as\s+\w+)?"
                     r"(?:\s*,\s*[A-Za-z_][\w.]*(?:\s+as\s+\w+)?)*)", re.M)


def module_names(text: str) -> list[str]:
    """Dotted names of ``text`` that may be modules, in text order, without repeats: the
    modules of ``from X import a, b`` (X, X.a, X.b: a name imported may be a submodule)
    and ``import X.Y as Z`` (X.Y) statements. Qualified names elsewhere in the text are not
    read: an output's ``<class 'sympy.core.numbers.Zero'>`` names the type of a result,
    not the code the reporter exercised."""
    found: list[str] = []
    for m in _FROM.finditer(text):
        found.append(m.group(1))
        found += [f"{m.group(1)}.{n.strip()}" for n in m.group(2).split(",") if n.strip().isidentifier()]
    for m in _IMPORT.finditer(text):
        found += [part.split()[0] for part in m.group(1).split(",") if part.strip()]
    return [n for n in dict.fromkeys(found) if "." in n and not n.startswith(".")][:MAX_NAMES]


def resolve(name: str, known_paths: Callable[[str], list[str]]) -> tuple[str, int] | None:
    """The indexed module a dotted ``name`` (or its longest prefix of two or more parts)
    imports: (its path without ``.py``/``/__init__.py``, its number of parts), or None.
    ``known_paths(written)``: indexed paths a written path refers to (the ranking's
    :class:`~gitrag.query.ranking.pipeline.Lookup`), one only, or the name is ambiguous."""
    parts = name.split(".")
    for n in range(len(parts), 1, -1):
        stem = "/".join(parts[:n])
        for written, suffix in ((f"{stem}.py", ".py"), (f"{stem}/__init__.py", "/__init__.py")):
            found = known_paths(written)
            if len(found) == 1 and found[0].endswith(written):
                return found[0][: -len(suffix)], n
    return None


def _shared(path: str, module: str, depth: int) -> float:
    """(shared - 1) / (depth - 1) of the module's last ``depth`` segments that ``path``
    (its extension dropped) starts with at the module's root."""
    segs = module.split("/")
    root, mod = segs[:-depth], segs[-depth:]
    p = list(PurePosixPath(path).with_suffix("").parts)
    if p[: len(root)] != root:
        return 0.0
    p = p[len(root):]
    shared = 0
    while shared < min(len(p), depth) and p[shared] == mod[shared]:
        shared += 1
    return (shared - 1) / (depth - 1) if shared > 1 else 0.0


def boost_modules(cands: dict[str, Candidate], query: Query, known_paths: Callable[[str], list[str]]) -> None:
    """Raise candidates in or near the Python modules a pasted question imports
    (see the module docstring; in place)."""
    if not is_pasted(query):
        return
    top = top_score(cands)
    if top <= 0:
        return
    modules = {r for r in (resolve(n, known_paths) for n in module_names(query.text)) if r is not None}
    if not modules:
        return
    cache: dict[str, float] = {}
    for c in cands.values():
        if c.path not in cache:
            cache[c.path] = max(_shared(c.path, m, d) for m, d in modules)
        c.score += MODULE_BOOST * top * cache[c.path]
