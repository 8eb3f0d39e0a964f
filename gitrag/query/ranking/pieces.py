"""Pieces of one definition come back as one result.

A definition too long for one chunk is cut into consecutive pieces that all carry its
symbol. When several of them rank, they are one answer, not several: a list of results
(best first) is rewritten so that results of the same file (same ``path`` and ``blob``) and
the same ``symbol`` whose byte ranges touch or overlap become one result spanning all of
them. It keeps the best piece's place in the list, its score and its point id; lines and
bytes widen to the union. Pieces that do not touch (a gap between them did not rank) stay
separate. Pure: no I/O, works on anything with the :class:`Piece` fields.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar


class Piece(Protocol):
    """What :func:`merge_pieces` reads and widens (``gitrag.query.retrieval.Result`` has it)."""

    path: str
    blob: str
    symbol: str
    start_line: int
    end_line: int
    start_byte: int
    end_byte: int
    score: float
    expanded_from: str


P = TypeVar("P", bound=Piece)


def merge_pieces(results: Sequence[P]) -> list[P]:
    """``results`` (best first) with touching pieces of one symbol merged; order kept.

    Results added by graph expansion (``expanded_from`` set) are left as they are.
    A merged result is the best-ranked piece, widened in place (the input objects are
    modified). O(n log n) in the number of results."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, r in enumerate(results):
        if r.symbol and not r.expanded_from and r.end_byte > r.start_byte:
            groups.setdefault((r.path, r.blob, r.symbol), []).append(i)
    absorbed: set[int] = set()
    for members in groups.values():
        if len(members) < 2:
            continue
        for run in _touching_runs(members, lambda i: (results[i].start_byte, results[i].end_byte)):
            absorbed |= _merge(results, run)
    return [r for i, r in enumerate(results) if i not in absorbed]


T = TypeVar("T")


def _touching_runs(items: Sequence[T], span: Callable[[T], tuple[int, int]]) -> list[list[T]]:
    """``items`` sorted by their byte ``span`` (start, end) and cut into runs whose ranges
    chain, each touching or overlapping the run so far: the pieces that are one place."""
    runs: list[list[T]] = []
    end = -1
    for item in sorted(items, key=span):
        start, stop = span(item)
        if runs and start <= end:
            runs[-1].append(item)
            end = max(end, stop)
        else:
            runs.append([item])
            end = stop
    return runs


def _merge(results: Sequence[Piece], run: list[int]) -> set[int]:
    """Widen the best-ranked result of ``run`` over the others; the indices it absorbed."""
    if len(run) < 2:
        return set()
    best = min(run)  # best first: the lowest index ranks highest
    keep = results[best]
    pieces = [results[i] for i in run]
    keep.start_byte = min(p.start_byte for p in pieces)
    keep.end_byte = max(p.end_byte for p in pieces)
    keep.start_line = min(p.start_line for p in pieces)
    keep.end_line = max(p.end_line for p in pieces)
    keep.score = max(p.score for p in pieces)
    return {i for i in run if i != best}


def pieces_of(chunks: Sequence[tuple[str, dict]], key: str) -> set[str]:
    """The keys of the pieces of the definition that the chunk ``key`` is a piece of, itself
    included: among ``chunks`` (``(key, payload)`` of one file), those of its blob and symbol
    whose byte ranges chain to it touching or overlapping, as :func:`merge_pieces` joins
    them; ``{key}`` for a chunk with no symbol or not among ``chunks``."""
    own = dict(chunks).get(key)
    if own is None or not own.get("symbol"):
        return {key}
    same = [(k, p) for k, p in chunks if p.get("symbol") == own["symbol"] and p.get("blob") == own.get("blob")
            and p.get("end_byte", 0) > p.get("start_byte", 0)]
    runs = _touching_runs(same, lambda kp: (kp[1]["start_byte"], kp[1]["end_byte"]))
    return next(({k for k, _ in run} for run in runs if any(k == key for k, _ in run)), {key})
