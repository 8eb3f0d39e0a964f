"""Ranked chunks -> ranked files, each with its best chunks (``ask --files``).

For an agent that wants to know which files to open rather than which lines to read. A
file ranks by the evidence of its chunks, aggregated: its best chunk's score plus a damped
sum of its next ones, ``s1 + d*s2 + d^2*s3`` over its best ``AGGREGATE_CHUNKS`` (3) with
``d = AGGREGATE_DECAY`` (0.25) (the passage-to-document aggregations of Dai & Callan 2019, MaxP and
SumP, between the two: one strong chunk still decides, while a file that answers in several
places outranks one lucky chunk, and a long file cannot win by volume alone). The chunk
scores are the ranking's, after file saturation, so a file's further chunks are already
damped once. Ties go to the file with more matching chunks, then the path, so the order is
stable. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

CHUNKS_PER_FILE = 3  # best chunks listed under each file
CANDIDATES_PER_FILE = 5  # chunk candidates searched per requested file (k files -> 5k chunks)
AGGREGATE_CHUNKS = 3  # chunks of a file whose scores add up to the file's
#: The n-th best chunk of a file adds its score x 0.25^(n-1). Measured at file level on every
#: shared set (bench/bench_files.py, BENCHMARKS.md "Files ranked by aggregated chunk
#: evidence"): d = 0.25 over three chunks was the one rule no worse than the best chunk alone
#: on any set (0.5 lost fastapi 0.008 MRR, a plain sum lost four sets); the listed scores are
#: already damped once by file saturation (x0.5 for a file's second chunk), so the second
#: chunk counts about an eighth of its own score.
AGGREGATE_DECAY = 0.25


class Ranked(Protocol):
    """What :func:`rank_files` reads from a result (``gitrag.query.retrieval.Result`` has it)."""

    path: str
    start_line: int
    end_line: int
    symbol: str
    kind: str
    language: str
    score: float


@dataclass
class FileChunk:
    """One of a file's best chunks: lines 1-based and inclusive."""

    start_line: int
    end_line: int
    symbol: str
    kind: str
    score: float

    def to_json(self) -> dict[str, Any]:
        return {"start_line": self.start_line, "end_line": self.end_line, "symbol": self.symbol,
                "kind": self.kind, "score": self.score}


@dataclass
class FileHit:
    """A ranked file: ``score`` aggregates its chunks' (:func:`file_score`); ``matches`` counts its chunks among the
    ranked candidates; ``chunks`` are its best (at most CHUNKS_PER_FILE), best first."""

    path: str
    language: str
    score: float
    matches: int
    chunks: list[FileChunk] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "language": self.language, "score": self.score, "matches": self.matches,
                "chunks": [c.to_json() for c in self.chunks]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FileHit:
        chunks = [FileChunk(int(c["start_line"]), int(c["end_line"]), str(c.get("symbol", "")),
                            str(c.get("kind", "")), float(c.get("score", 0.0))) for c in data.get("chunks", [])]
        return cls(str(data["path"]), str(data.get("language", "")), float(data.get("score", 0.0)),
                   int(data.get("matches", len(chunks))), chunks)


def file_score(scores: Sequence[float], chunks: int = AGGREGATE_CHUNKS, decay: float = AGGREGATE_DECAY) -> float:
    """A file's score from its chunks' ``scores``: the best plus the next ``chunks - 1``, the
    n-th best weighed ``decay ** (n - 1)`` (``chunks=1``: the best chunk's score alone)."""
    best = sorted(scores, reverse=True)[:max(1, chunks)]
    return sum(s * decay**i for i, s in enumerate(best))


def rank_files(results: Sequence[Ranked], k: int, per_file: int = CHUNKS_PER_FILE,
               chunks: int = AGGREGATE_CHUNKS, decay: float = AGGREGATE_DECAY) -> list[FileHit]:
    """The top ``k`` files of ``results`` (chunks, best first) by :func:`file_score` of their
    chunks (``chunks``, ``decay``), each with up to ``per_file`` of its chunks in their
    ranked order; ``score`` is the file's aggregated score. Results without a path are
    ignored."""
    by_path: dict[str, list[Ranked]] = {}
    for r in results:
        if r.path:
            by_path.setdefault(r.path, []).append(r)
    scored = {path: file_score([r.score for r in rs], chunks, decay) for path, rs in by_path.items()}
    ordered = sorted(by_path.items(), key=lambda item: (-scored[item[0]], -len(item[1]), item[0]))
    out = []
    for path, rs in ordered[:k]:
        best = sorted(rs, key=lambda r: -r.score)[:per_file]  # stable: ties keep rank order
        out.append(FileHit(path, rs[0].language, round(scored[path], 6), len(rs),
                           [FileChunk(r.start_line, r.end_line, r.symbol, r.kind, r.score) for r in best]))
    return out
