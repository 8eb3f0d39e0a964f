"""Provisional chunks of an edited file, from its committed chunks: no tokenising.

    committed blob + its points' payloads (the chunks the index holds) + the file on disk
    -> the changed byte range (the common prefix and suffix of the two versions)
    -> the definitions of the changed region, the old and the new (the touched chunks' lines
       with every committed definition overlapping them: a method's class; each parsed with
       tree-sitter and walked as the symbol graph is, ~0.15 ms for a function in a 500-line
       file), or the file's headings (Markdown, rst, INI): when they differ (a function
       appended after the last one, removed, renamed), None: the chunker cuts it
    -> chunks wholly before it: as committed; wholly after it: moved by the edit's bytes and
       lines (same text, so the same chunk SHA-256, vectors and sparse weights from the cache)
    -> the committed chunks the change touches: one chunk over their range as it reads now,
       named as they were (its embedding text: that name, then the normalised code)
    -> the definitions: the region's as parsed now, the others moved the same way

An edit inside one function of a 500-line file re-chunks nothing else, so the overlay's
first ask after an edit pays neither the chunker's layout nor the tokeniser
(gitrag.query.worktree uses it in the daemon, whose warm-up replaces it with the
chunker's exact cut a moment later). The names are always right: an edit that changes
which definitions the file holds (a function appended after the last one, a rename) is
left to the chunker, so it is never answered under a neighbour's name and range. What
remains approximate is only the size of the changed range: it is one chunk (the chunker
might split a function that grew past its size). None when it cannot tell: no committed
chunk touches the change, the changed range is large (over MAX_CHANGED_NONWS
non-whitespace bytes) or not UTF-8, or the definitions (headings) differ from the committed.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gitrag.index.chunking import content_free, language_for
from gitrag.index.chunking.model import Chunk, FileAnalysis, SymbolDef
from gitrag.index.chunking.split import TARGET_NONWS
from gitrag.index.chunking.text import embedding_text, header

MAX_CHANGED_NONWS = 2 * TARGET_NONWS  # a bigger change is chunked by the chunker


@dataclass(frozen=True)
class KnownChunk(Chunk):
    """A committed chunk carried over unchanged: its SHA-256 is known, its text is not read."""

    known_hash: str = ""

    @property
    def hash(self) -> str:
        return self.known_hash


def _common_prefix(a: bytes, b: bytes, limit: int) -> int:
    if limit <= 0:
        return 0
    x, y = np.frombuffer(a, np.uint8, limit), np.frombuffer(b, np.uint8, limit)
    diff = np.flatnonzero(x != y)
    return int(diff[0]) if len(diff) else limit


def _common_suffix(a: bytes, b: bytes, limit: int) -> int:
    if limit <= 0:
        return 0
    x = np.frombuffer(a, np.uint8)[len(a) - limit:][::-1]
    y = np.frombuffer(b, np.uint8)[len(b) - limit:][::-1]
    diff = np.flatnonzero(x != y)
    return int(diff[0]) if len(diff) else limit


def splice(path: str, old: bytes, new: bytes, committed: list[dict[str, Any]],
           graph: str | list[dict[str, Any]] | None) -> FileAnalysis | None:
    """The provisional analysis of ``new`` (the file on disk) from ``old`` (its committed
    blob), ``committed`` (its points' payloads: start/end byte and line, symbol, kind,
    language, chunk_hash, prose) and ``graph`` (its symbol graph JSON or that JSON's
    ``definitions`` list, or None); None when
    the chunker must cut it (see the module doc)."""
    if not committed or old == new:
        return None
    chunks = sorted(committed, key=lambda c: int(c["start_byte"]))
    p = _common_prefix(old, new, min(len(old), len(new)))
    s = _common_suffix(old, new, min(len(old), len(new)) - p)
    old_hi, delta = len(old) - s, len(new) - len(old)
    if old_hi > p:
        touched = [c for c in chunks if c["start_byte"] < old_hi and c["end_byte"] > p]
    else:  # a pure insertion at p: the chunk(s) it borders
        touched = [c for c in chunks if c["start_byte"] <= p <= c["end_byte"]]
    if not touched:
        return None
    lo, hi = min(c["start_byte"] for c in touched), max(c["end_byte"] for c in touched)
    new_hi = hi + delta
    if new_hi <= lo:
        return None
    body = new[lo:new_hi]
    if len(body) - sum(body.count(w) for w in b" \t\r\n\f\v") > MAX_CHANGED_NONWS:
        return None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = new.count(b"\n") - old.count(b"\n")
    language = str(touched[0].get("language", "text"))
    if language_for(path, new) != language:
        return None
    committed_defs = _moved(graph, 0, 0, 0)
    region = _region(old, lo, hi, touched, committed_defs)
    now = _definitions_now(path, language, old, new, region, delta)
    if now is False:
        return None  # a definition (heading) added, removed or renamed: the chunker names and cuts it
    out: list[Chunk] = []
    for c in chunks:
        if c["end_byte"] <= lo:
            out.append(_known(c, 0, 0))
    if not content_free(new, lo, new_hi):
        symbol = ", ".join(dict.fromkeys(str(c.get("symbol", "")) for c in touched if c.get("symbol"))) or "<module>"
        start_line = new.count(b"\n", 0, lo) + 1
        out.append(Chunk(lo, new_hi, start_line, start_line + new.count(b"\n", lo, max(lo, new_hi - 1)), symbol,
                         str(touched[0].get("kind", "")), language, embedding_text(header(path, symbol, ()), text),
                         prose=float(touched[0].get("prose", 0.0) or 0.0)))
    for c in chunks:
        if c["start_byte"] >= hi:
            out.append(_known(c, delta, lines))
    if isinstance(now, list):  # the region's definitions as parsed now, the others moved
        first, last = region[2], region[3]
        before = [d for d in committed_defs if d.end_line < first]
        after = [replace(d, start_line=d.start_line + lines, end_line=d.end_line + lines)
                 for d in committed_defs if d.start_line > last]
        return FileAnalysis(language, out, before + now + after)
    first_line, last_line = old.count(b"\n", 0, p) + 1, old.count(b"\n", 0, max(p, old_hi - 1)) + 1
    return FileAnalysis(language, out, _moved(graph, first_line, last_line, lines))


def _region(old: bytes, lo: int, hi: int, touched: list[dict[str, Any]], defs: list[SymbolDef]
            ) -> tuple[int, int, int, int]:
    """(start byte, end byte, first line, last line) of ``old``: whole lines holding the touched
    chunks (bytes ``lo``-``hi``) and every committed definition that overlaps them, so that
    the region parses alone as it does in the file (a method's class comes with it)."""
    first = min(int(c["start_line"]) for c in touched)
    last = max(int(c["end_line"]) for c in touched)
    grown = True
    while grown:
        grown = False
        for d in defs:
            if d.start_line <= last and d.end_line >= first and (d.start_line < first or d.end_line > last):
                first, last, grown = min(first, d.start_line), max(last, d.end_line), True
    ends = np.flatnonzero(np.frombuffer(old, np.uint8) == 10)
    first = max(1, min(first, len(ends) + 1))
    start = 0 if first == 1 else int(ends[first - 2]) + 1
    stop = int(ends[last - 1]) + 1 if last - 1 < len(ends) else len(old)
    return min(start, lo), max(stop, hi), first, last


def _definitions_now(path: str, language: str, old: bytes, new: bytes, region: tuple[int, int, int, int],
                     delta: int) -> list[SymbolDef] | bool:
    """Whether ``new`` holds the definitions ``old`` does, from ``region`` alone (see
    :func:`_region`; the rest of the two files is the same): for a language with a grammar,
    the region of both is parsed and its definitions walked (the symbol graph's own walk),
    and the region's definitions in ``new`` (file lines) are returned when their names,
    kinds and parents are the old ones, else False (False too when either does not parse);
    for Markdown, rst and INI, True when the headings are the same, else False; True when
    nothing names the chunks (line windows)."""
    from gitrag.index.chunking import sections
    from gitrag.index.chunking.languages import SPECS

    start, stop = region[0], region[1]
    spec = SPECS.get(language)
    if spec is not None:
        from gitrag.index.chunking.graph import extract
        from gitrag.index.chunking.treesitter import parse

        found = []
        for text in (old[start:stop], new[start:stop + delta]):
            tree, _ = parse(language, text)
            if tree is None:
                return False
            found.append(list(extract(tree, spec, text).definitions))
        if _names(found[0]) != _names(found[1]):
            return False
        shift = old.count(b"\n", 0, start)
        return [replace(d, start_line=d.start_line + shift, end_line=d.end_line + shift) for d in found[1]]
    finder = {"markdown": sections.markdown_headings, "rst": sections.rst_headings,
              "ini": sections.ini_headings}.get(language)
    if finder is None:
        return True
    return [h[1:] for h in finder(old)] == [h[1:] for h in finder(new)]


def _names(defs: list[SymbolDef]) -> Counter[tuple[str, str, str]]:
    return Counter((d.name, d.kind, d.parent) for d in defs)


def _known(c: dict[str, Any], delta: int, lines: int) -> KnownChunk:
    # the frozen dataclass's __init__ sets its 14 fields one object.__setattr__ at a time:
    # a file's 50 carried-over chunks were a fifth of a provisional cut; same fields, set at once
    chunk = object.__new__(KnownChunk)
    chunk.__dict__.update(
        start_byte=int(c["start_byte"]) + delta, end_byte=int(c["end_byte"]) + delta,
        start_line=int(c["start_line"]) + lines, end_line=int(c["end_line"]) + lines,
        symbol=str(c.get("symbol", "")), kind=str(c.get("kind", "")), language=str(c.get("language", "text")),
        text="", context="", embeddable=True, span=None, prose=float(c.get("prose", 0.0) or 0.0), roles=(),
        known_hash=str(c["chunk_hash"]))
    return chunk


def definitions(graph: str | None) -> list[dict[str, Any]]:
    """The ``definitions`` of a symbol graph JSON ([] when there is none or it does not parse)."""
    try:
        return list(json.loads(graph).get("definitions", [])) if graph else []
    except (ValueError, AttributeError, TypeError):
        return []


def _moved(graph: str | list[dict[str, Any]] | None, first: int, last: int, lines: int) -> list[SymbolDef]:
    """The committed definitions with the edit's lines: after the change moved by ``lines``;
    around it, their end moved; before it, as they were."""
    defs = graph if isinstance(graph, list) else definitions(graph)
    out = []
    for d in defs:
        start, end = int(d.get("start_line", 0)), int(d.get("end_line", 0))
        if start > last:
            start, end = start + lines, end + lines
        elif end >= first:
            end = max(start, end + lines)
        out.append(SymbolDef(str(d.get("name", "")), str(d.get("kind", "")), start, end, str(d.get("parent", ""))))
    return out
