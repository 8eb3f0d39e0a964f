"""A path prefix that names no indexed file (``ask --path``, ``related --path``, the MCP tools'
``path_prefix``): the check, and the one line that says so with the nearest prefixes that do
name files, so a typo (``utl/``) is not read as "nothing relevant"."""

from __future__ import annotations

import difflib
from collections.abc import Collection

NEAREST = 3  # prefixes named at most
CUTOFF = 0.6  # difflib's similarity ratio a named prefix has at least


def matches(paths: Collection[str], prefix: str) -> bool:
    """Whether any of ``paths`` (repository-relative, ``/``-separated) starts with ``prefix``."""
    return any(p.startswith(prefix) for p in paths)


def nearest(paths: Collection[str], prefix: str, n: int = NEAREST) -> list[str]:
    """Up to ``n`` prefixes of ``paths`` most like ``prefix``, best first: each path cut to as
    many segments as ``prefix`` has (a folder keeps its ``/``), so ``utl/`` finds ``util/`` and
    ``util/strngs.py`` finds ``util/strings.py``; none below a similarity ratio of CUTOFF."""
    depth = prefix.rstrip("/").count("/") + 1
    cut = set()
    for path in paths:
        parts = path.split("/")
        cut.add("/".join(parts[:depth]) + ("/" if len(parts) > depth else ""))
    return difflib.get_close_matches(prefix, sorted(cut), n=n, cutoff=CUTOFF)


def unmatched(paths: Collection[str], prefix: str, named: str) -> str | None:
    """None when one of ``paths`` starts with ``prefix``; else the line saying ``named`` (how the
    user gave it: ``--path utl/``) matches no indexed file, with the nearest prefixes, or, when
    none is near, how to list the files."""
    if matches(paths, prefix):
        return None
    near = nearest(paths, prefix)
    if near:
        return f"{named} matches no indexed file; nearest: {', '.join(near)}"
    return f"{named} matches no indexed file (`git ls-files` lists the repository's files)"
