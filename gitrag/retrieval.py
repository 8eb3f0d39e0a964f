"""Question -> ranked, citable code locations.

    embed the question (dense) and take its code-aware terms (sparse)
    -> one store query: dense + sparse prefetches fused by RRF (k = 60), or one of them
    -> snippets read back from the git object database by (blob id, byte range)
    -> freshness: the commit answered from, HEAD now, work-tree files not in the index
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gitrag import sparse
from gitrag.errors import ConfigError, NotIndexed
from gitrag.store import Hit, SearchFilter
from gitrag.workspace import Workspace

MODES = ("hybrid", "dense", "sparse")
PREFETCH = 40


@dataclass
class Result:
    """One ranked location; lines are 1-based and inclusive."""

    path: str
    start_line: int
    end_line: int
    symbol: str
    kind: str
    language: str
    score: float
    snippet: str = ""
    blob: str = ""
    start_byte: int = 0
    end_byte: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Freshness:
    branch: str
    commit: str | None  # the commit the index answered from
    head: str | None  # the branch's HEAD now
    worktree_changes: int

    @property
    def up_to_date(self) -> bool:
        return self.commit is not None and self.commit == self.head


@dataclass
class AskResponse:
    question: str
    freshness: Freshness
    results: list[Result] = field(default_factory=list)
    answer: str | None = None
    mode: str = "hybrid"

    def to_json(self) -> dict[str, Any]:
        f = self.freshness
        return {
            "question": self.question, "branch": f.branch, "commit": f.commit, "head": f.head,
            "up_to_date": f.up_to_date, "worktree_changes": f.worktree_changes,
            "results": [r.to_json() for r in self.results], "answer": self.answer, "mode": self.mode,
        }


def freshness(ws: Workspace) -> Freshness:
    name = ws.repo.branch()
    branch = ws.state.branch(name)
    return Freshness(name, branch.indexed_commit if branch else None, ws.repo.head(), ws.repo.worktree_changes())


def search(
    ws: Workspace, question: str, *, k: int = 10, mode: str = "hybrid", scope: SearchFilter | None = None,
    snippets: bool = True,
) -> list[Result]:
    """Top ``k`` results for ``question`` in the current branch's collection, best first.

    ``mode``: ``hybrid`` (dense + sparse, RRF k=60 per Cormack et al. 2009), ``dense`` or
    ``sparse``. Raises NotIndexed when the branch has no index, ConfigError for a bad mode."""
    if mode not in MODES:
        raise ConfigError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    name = ws.repo.branch()
    branch = ws.state.branch(name)
    if branch is None or not ws.store.has_collection(branch.collection):
        raise NotIndexed(f"branch {name!r} is not indexed yet; run `gitrag index` first")
    dense = ws.embedder.embed_query(question) if mode in ("hybrid", "dense") else None
    terms = sparse.query_vector(question) if mode in ("hybrid", "sparse") else None
    if terms is not None and not terms.indices and dense is None:
        return []
    if terms is not None and not terms.indices:
        terms = None
    hits = ws.store.search(branch.collection, dense=dense, sparse=terms, limit=k, prefetch=max(PREFETCH, k), scope=scope)
    results = [_result(h) for h in hits]
    if snippets:
        for r in results:
            r.snippet = read_snippet(ws, r)
    return results


def _result(hit: Hit) -> Result:
    p = hit.payload
    return Result(
        p["path"], p["start_line"], p["end_line"], p.get("symbol", ""), p.get("kind", ""), p.get("language", ""),
        round(float(hit.score), 6), blob=p.get("blob", ""), start_byte=p.get("start_byte", 0), end_byte=p.get("end_byte", 0),
    )


def read_snippet(ws: Workspace, result: Result) -> str:
    """The result's source, sliced by bytes from its git blob, decoded as UTF-8 (replacing errors)."""
    try:
        data = ws.repo.read_blob(result.blob)
    except (KeyError, ValueError):
        return ""
    return data[result.start_byte : result.end_byte].decode("utf-8", "replace")


def ask(
    ws: Workspace, question: str, *, k: int = 10, mode: str = "hybrid", scope: SearchFilter | None = None
) -> AskResponse:
    """Search and wrap the results with their freshness. No chat model yet: ``answer`` is None."""
    results = search(ws, question, k=k, mode=mode, scope=scope)
    return AskResponse(question, freshness(ws), results, None, mode)
