"""Ranked chunks -> ranked files, each with its best chunks (``ask --files``).

For an agent that wants to know which files to open rather than which lines to read. A
file ranks by its best chunk's score (the chunk ranking already weighs what matters; a
file-level evaluation of a chunk list, which keeps each path's first result, ranks
files the same way); ties go to the file with more matching chunks, then the larger
summed score, then the path, so the order is stable. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

CHUNKS_PER_FILE = 3  # best chunks listed under each file
CANDIDATES_PER_FILE = 5  # chunk candidates searched per requested file (k files -> 5k chunks)


class Ranked(Protocol):
    """What :func:`rank_files` reads from a result (``gitrag.retrieval.Result`` has it)."""

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
    """A ranked file: ``score`` is its best chunk's; ``matches`` counts its chunks among the
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


def rank_files(results: Sequence[Ranked], k: int, per_file: int = CHUNKS_PER_FILE) -> list[FileHit]:
    """The top ``k`` files of ``results`` (chunks, best first), each with up to
    ``per_file`` of its chunks in their ranked order. Results without a path are ignored."""
    by_path: dict[str, list[Ranked]] = {}
    for r in results:
        if r.path:
            by_path.setdefault(r.path, []).append(r)
    ordered = sorted(by_path.items(), key=lambda item: (
        -max(r.score for r in item[1]), -len(item[1]), -sum(r.score for r in item[1]), item[0]))
    out = []
    for path, chunks in ordered[:k]:
        best = sorted(chunks, key=lambda r: -r.score)[:per_file]  # stable: ties keep rank order
        out.append(FileHit(path, chunks[0].language, max(r.score for r in chunks), len(chunks),
                           [FileChunk(r.start_line, r.end_line, r.symbol, r.kind, r.score) for r in best]))
    return out
