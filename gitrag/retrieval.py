"""Question -> ranked, citable code locations.

    embed the question (dense) and take its code-aware terms (sparse)
    -> one store query: dense + sparse prefetches fused by RRF (k = 60), or one of them
    -> snippets read back from the git object database by (blob id, byte range)
    -> freshness: the commit answered from, HEAD now, work-tree files not in the index
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gitrag import rerank, sparse, symbols
from gitrag.errors import ConfigError, EmbedderMismatch, NotIndexed
from gitrag.store import Hit, SearchFilter
from gitrag.workspace import Workspace

MODES = ("hybrid", "dense", "sparse")
PREFETCH = 50  # candidates from each of the dense and sparse lists (40: mean nDCG@10 0.734, 50: 0.746)
CANDIDATES = 50  # fused candidates handed to the reranker
DEFINITIONS_PER_IDENTIFIER = 3
EXPAND_TOP = 3  # results whose dependencies --expand follows
EXPAND_MAX_CANDIDATES = 2  # skip call edges that could mean more definitions than this


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
    point_id: str = ""
    expanded_from: str = ""  # set on a graph expansion: the result whose dependency this is

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
    snippets: bool = True, rerank_results: bool = True, expand: int = 0,
) -> list[Result]:
    """Top ``k`` results for ``question`` in the current branch's collection, best first.

    ``mode``: ``hybrid`` (dense + sparse, RRF k=60 per Cormack et al. 2009), ``dense`` or
    ``sparse``; hybrid results are then reranked with definition matches (see
    gitrag.rerank) unless ``rerank_results`` is False. ``expand`` > 0 appends, after the
    ``k`` results, the definitions the top results call or inherit from, up to that many
    hops away, scored ``parent score * 0.5 ** hops`` (``expanded_from`` names the parent).
    Raises NotIndexed when the branch has no index, ConfigError for a bad mode."""
    if mode not in MODES:
        raise ConfigError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    name = ws.repo.branch()
    ws.repo.require_head()  # an unborn branch: say "commit first", not "index first"
    branch = ws.state.branch(name)
    if branch is None or not branch.materialized or not ws.store.has_collection(branch.collection):
        raise NotIndexed(f"branch {name!r} is not indexed yet; run `gitrag index` first")
    if mode != "sparse" and branch.fingerprint != ws.embedder.fingerprint:
        raise EmbedderMismatch(
            f"branch {name!r} was indexed with embedder {branch.fingerprint}, but {ws.embedder.fingerprint} is "
            f"configured; run `gitrag index --rebuild` to re-embed, or switch the embedder back"
        )
    dense = ws.embedder.embed_query(question) if mode in ("hybrid", "dense") else None
    terms = sparse.query_vector(question) if mode in ("hybrid", "sparse") else None
    if terms is not None and not terms.indices and dense is None:
        return []
    if terms is not None and not terms.indices:
        terms = None
    rerank_results = rerank_results and mode == "hybrid"
    limit = max(k, CANDIDATES) if rerank_results else k
    hits = ws.store.search(branch.collection, dense=dense, sparse=terms, limit=limit, branch=branch.view,
                           prefetch=max(PREFETCH, k), scope=scope)
    results = [_result(h) for h in hits]
    if rerank_results:
        results = _rerank(ws, branch.name, question, results, scope)
    results = results[:k]
    if expand > 0:
        results += _expansions(ws, branch.name, results, expand, scope)
    if snippets:
        for r in results:
            r.snippet = read_snippet(ws, r)
    return results


def _result(hit: Hit) -> Result:
    return _from_payload(hit.id, hit.payload, float(hit.score))


def _from_payload(point_id: str, p: dict[str, Any], score: float) -> Result:
    return Result(
        p["path"], p["start_line"], p["end_line"], p.get("symbol", ""), p.get("kind", ""), p.get("language", ""),
        round(score, 6), blob=p.get("blob", ""), start_byte=p.get("start_byte", 0), end_byte=p.get("end_byte", 0),
        point_id=point_id,
    )


def _rerank(ws: Workspace, branch: str, question: str, results: list[Result], scope: SearchFilter | None) -> list[Result]:
    """Fuse the chunks defining the question's identifiers into the ranking (see gitrag.rerank)."""
    idents = rerank.query_identifiers(question)
    if not idents:
        return results
    defs = _definition_results(ws, branch, idents, scope)
    by_key = {r.point_id: r for r in [*results, *defs]}
    fused = rerank.fuse_definitions([_candidate(r) for r in results], [_candidate(r) for r in defs])
    out = []
    for c in fused:
        r = by_key[c.key]
        r.score = round(c.score, 6)
        out.append(r)
    return out


def _candidate(r: Result) -> rerank.Candidate:
    return rerank.Candidate(r.point_id, r.path, r.start_line, r.end_line, r.symbol, r.score)


def _definition_results(ws: Workspace, branch: str, idents: list[str], scope: SearchFilter | None) -> list[Result]:
    """Chunks holding the definitions of ``idents``, in identifier order, then match order."""
    out: dict[str, Result] = {}
    for ident in idents:
        for d in symbols.find_definitions(ws, ident)[:DEFINITIONS_PER_IDENTIFIER]:
            if scope and not _in_scope(d, scope):
                continue
            for r in _chunks_at(ws, branch, d):
                out.setdefault(r.point_id, r)
    return list(out.values())


def _expansions(ws: Workspace, branch: str, results: list[Result], hops: int, scope: SearchFilter | None) -> list[Result]:
    """Chunks of the definitions the top results depend on (callees, bases), best first."""
    found: dict[str, Result] = {}
    parents = {r.point_id: r for r in results}

    def neighbours(c: rerank.Candidate) -> list[tuple[rerank.Candidate, int]]:
        out = []
        name = c.symbol.split(", ")[0]
        if not name or name.startswith("<"):
            return out
        deps = symbols.dependencies(ws, name, hops=hops, path=c.path)
        for link in deps["callees"] + deps["bases"]:
            d = link.definition
            if d is None or link.candidates > EXPAND_MAX_CANDIDATES or (scope and not _in_scope(d, scope)):
                continue
            for r in _chunks_at(ws, branch, d):
                r.expanded_from = f"{c.path}:{c.start_line}-{c.end_line}"
                found.setdefault(r.point_id, r)
                out.append((_candidate(r), link.hop))
        return out

    ranked = rerank.expand([_candidate(r) for r in results], neighbours, top=EXPAND_TOP)
    out = []
    for c in ranked:
        if c.key not in parents and c.key in found:
            found[c.key].score = round(c.score, 6)
            out.append(found[c.key])
    return out


def _in_scope(d: symbols.Definition, scope: SearchFilter) -> bool:
    return d.path.startswith(scope.path_prefix) and (not scope.language or d.language == scope.language)


def _chunks_at(ws: Workspace, branch: str, d: symbols.Definition) -> list[Result]:
    """The chunks of ``d``'s file that hold its first line."""
    rows = ws.state.points(branch, [d.path])
    return [_from_payload(r.point_id, r.payload, 0.0) for r in rows
            if r.payload["start_line"] <= d.start_line <= r.payload["end_line"]]


def read_snippet(ws: Workspace, result: Result) -> str:
    """The result's source, sliced by bytes from its git blob, decoded as UTF-8 (replacing errors)."""
    try:
        data = ws.repo.read_blob(result.blob)
    except (KeyError, ValueError):
        return ""
    return data[result.start_byte : result.end_byte].decode("utf-8", "replace")


def ask(
    ws: Workspace, question: str, *, k: int = 10, mode: str = "hybrid", scope: SearchFilter | None = None,
    expand: int = 0,
) -> AskResponse:
    """Search and wrap the results with their freshness; ``answer`` is filled by the caller."""
    results = search(ws, question, k=k, mode=mode, scope=scope, expand=expand)
    return AskResponse(question, freshness(ws), results, None, mode)
