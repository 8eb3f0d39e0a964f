"""Question -> ranked, citable code locations.

    analyse the question (gitrag.query.ranking.query), embed it (dense), take its code-aware terms (sparse)
    -> two store queries, the dense and the sparse list (ids and scores), and the payloads of
       each list's top PREFETCH by id -> gitrag.query.ranking (fusion, stages, top k)
       (with the work tree's uncommitted files merged into both lists, gitrag.query.worktree)
    -> snippets read back from the git object database by (blob id, byte range), or from
       the bytes read from disk for a work-tree result
    -> freshness: the commit answered from, HEAD now, work-tree files not in the index
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from functools import lru_cache
from typing import Any

from gitrag.errors import ConfigError, EmbedderMismatch, NotIndexed
from gitrag.index import sparse, symbols
from gitrag.index.integrity import check_known, check_list, check_results
from gitrag.index.store import Hit, SearchFilter
from gitrag.index.workspace import Workspace
from gitrag.query import callees, ranking, worktree
from gitrag.query.file_results import CANDIDATES_PER_FILE, rank_files
from gitrag.query.ranking import messages, multi, parts
from gitrag.query.ranking.pieces import merge_pieces
from gitrag.query.ranking.query import DENSE_CHARS
from gitrag.query.results import AskResponse, Freshness, Result

MODES = ("hybrid", "dense", "sparse")
__all__ = ["AskResponse", "Freshness", "Result", "ask", "candidates", "freshness", "read_snippet", "search"]
PREFETCH = 50  # candidates from each of the dense and sparse lists (40: mean nDCG@10 0.734, 50: 0.746)
#: Depth each list is read to for the scores of those candidates: a candidate in one list's
#: top PREFETCH keeps its real score in the other list down to this rank (0, that list's floor,
#: only below it). A click concept target at dense rank 5 that BM25 puts at rank 40-58 had
#: sparse 0 and fell out of the top 10 (BENCHMARKS.md, "Concept questions: where the target sits").
SCORE_DEPTH = 300
EXPAND_TOP = 3  # results whose dependencies --expand follows
EXPAND_MAX_CANDIDATES = 2  # skip call edges that could mean more definitions than this


def freshness(ws: Workspace, overlay: worktree.Overlay | None = None) -> Freshness:
    """The branch, its indexed commit, HEAD and the work-tree files that differ from HEAD
    (counted by ``overlay`` when one was built, so git status runs once per ask)."""
    name = ws.repo.branch()
    branch = ws.state.branch(name)
    changes = overlay.changes if overlay is not None else ws.repo.worktree_changes()
    return Freshness(name, branch.indexed_commit if branch else None, ws.repo.head(), changes)


def overlay_for(ws: Workspace, deadline: float | None = None) -> worktree.Overlay | None:
    """The work-tree overlay of the current branch's index (gitrag.query.worktree), or None when
    the branch is not indexed (search says so). ``deadline``: see ``worktree.build``."""
    branch = ws.state.branch(ws.repo.branch())
    if branch is None or ws.repo.head() is None:
        return None
    return worktree.build(ws, branch, deadline=deadline)


def mark_in_head(results: list[Result], overlay: worktree.Overlay | None) -> None:
    """Set ``in_head`` on the work-tree results whose file is HEAD's blob, committed since the
    indexed commit and not indexed yet (``Overlay.unindexed``), not an uncommitted edit."""
    if overlay is None or not overlay.unindexed:
        return
    for r in results:
        f = overlay.files.get(r.path)
        r.in_head = (r.source == worktree.SOURCE and r.path in overlay.unindexed and f is not None
                     and f.blob == r.blob)


def search(
    ws: Workspace, question: str, *, k: int = 10, mode: str = "hybrid", scope: SearchFilter | None = None,
    snippets: bool = True, rerank_results: bool = True, expand: int = 0, disable: Collection[str] = (),
    merge: bool = True, overlay: worktree.Overlay | None = None, view: str | None = None,
) -> list[Result]:
    """Top ``k`` results for ``question`` in the current branch's collection, best first.

    ``mode``: ``hybrid`` (the dense and the sparse list, ``PREFETCH`` each, with both scores
    read to ``SCORE_DEPTH``, ranked by
    gitrag.query.ranking: score fusion weighted by query type, definitions, path match,
    coherence, path priors, file saturation), ``dense`` or ``sparse`` (one list, raw
    cosine / BM25 scores). ``rerank_results=False`` gives the store's plain RRF fusion
    (k = 60, Cormack et al. 2009) instead of the ranking. ``disable``: ranking stages to
    switch off by name (gitrag.query.ranking.STAGES). Equal scores are ordered by path, start
    line and point id, so the same question gives the same list. ``expand`` > 0 appends,
    after the ``k`` results, at most ``k`` more: the best of the definitions the top results
    call or inherit from, up to that many hops away, scored ``parent score * 0.5 ** hops``
    (``expanded_from`` names the parent). ``merge``: touching pieces of one definition become one result
    (gitrag.query.ranking.pieces) before the top ``k`` are taken. ``scope.exclude`` globs are
    resolved against the branch's manifest here, so the store leaves those paths out of
    the query itself. ``overlay`` (gitrag.query.worktree): the work tree's changed files join
    both lists (``source="worktree"``) and the paths it hides leave them. ``view``: search
    that view of the collection (a revision view, gitrag.query.revisions) instead of the current
    branch. Raises NotIndexed when the branch has no index, ConfigError for a bad
    mode or an unknown stage."""
    if mode not in MODES:
        raise ConfigError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    try:
        off = ranking.check(disable)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    name = view or ws.repo.branch()
    ws.repo.require_head()  # an unborn branch: say "commit first", not "index first"
    branch = ws.state.branch(name)
    if branch is None or not branch.materialized or not ws.store.has_collection(branch.collection):
        raise NotIndexed(f"branch {name!r} is not indexed yet; run `gitrag index` first")
    if mode != "sparse" and branch.fingerprint != ws.embedder.fingerprint:
        raise EmbedderMismatch(
            f"branch {name!r} was indexed with embedder {branch.fingerprint}, but {ws.embedder.fingerprint} is "
            f"configured; run `gitrag index --rebuild` to re-embed, or switch the embedder back"
        )
    if scope is not None and scope.exclude:
        scope = scope.resolve(ws.state.files(branch.name))
    if overlay is not None and not overlay.active:
        overlay = None
    if overlay is not None:
        scope = overlay.scope(scope)
    query = ranking.analyse(question, long_questions="long-query" not in off)
    dense = ws.embedder.embed_query(query.dense_text) if mode in ("hybrid", "dense") else None
    terms = sparse.query_vector(question, query.term_weights) if mode in ("hybrid", "sparse") else None
    if terms is not None and not terms.indices:
        if dense is None:
            return []
        terms = None  # no sparse term (``g``, ``? !``): the dense list alone, raw cosines unless it names a symbol
    coll = branch.collection
    want = 2 * k if merge else k  # merging pieces frees places
    scores: dict[str, float] = {}  # the engine's cosines, checked against the points' vectors
    served: dict[str, dict[str, Any]] | None = None  # the store payloads shown (the ranked search shows the state's)
    listed: list[tuple[int, int]] = []  # (dense hits the store returned, asked for): a short list is checked
    if mode == "hybrid" and rerank_results and (terms is not None or query.identifiers or query.capitalised):
        results = _ranked(ws, branch.name, query, dense, terms, want, scope, off, scores, overlay, listed)
    else:
        more = overlay.extra_depth if overlay is not None else 0
        hits = ws.store.search(coll, dense=dense, sparse=terms, limit=want + more, prefetch=max(PREFETCH, want) + more,
                               scope=scope, branch=branch.view)
        if dense is not None and terms is None:
            listed.append((len(hits), want + more))
        if overlay is not None:
            hits = overlay.drop(hits)[:want]
        if overlay is not None and (dense is None or terms is None):  # one list: raw scores merge as they are
            hits = worktree.merge(hits, _overlay_hits(ws, coll, overlay, dense, terms, want, scope), want)
        results = sorted(_shown(ws, hits), key=_stable)
        served = {h.id: h.payload for h in hits}  # as the store gave them: their digests are checked
        if terms is None:
            scores = {h.id: float(h.score) for h in hits}
    if merge:
        results = merge_pieces(results)
    results = results[:k]
    if expand > 0:
        results += _expansions(ws, branch.name, results, expand, scope, view)[:k]
    # the points about to be shown: vectors against their signatures, shown store payloads against their
    # digests (StoreDamaged); the work tree's chunks are not in the store: nothing there to check
    check_results(ws, coll, branch.fingerprint, (r.point_id for r in results if r.source != "worktree"), dense,
                  scores, served)
    if listed and listed[0][0] < listed[0][1]:  # the store's dense list came back short (or empty): lost points,
        check_list(ws, branch, *listed[0], scoped=scope is not None)  # or vectors it cannot score?
    if snippets:
        for r in results:
            r.snippet = read_snippet(ws, r, overlay)
    return results


def _overlay_hits(ws: Workspace, coll: str, overlay: worktree.Overlay, dense: Any, terms: Any, depth: int,
                  scope: SearchFilter | None, store_hits: list[Hit] | None = None) -> list[Hit]:
    """The overlay's dense list (given ``dense``) or sparse list (given ``terms``), scored as
    the store's; with the store's list (``store_hits``, ``depth`` long), only what can make
    the merged list."""
    floor = store_hits[-1].score if store_hits is not None and len(store_hits) >= depth else float("-inf")
    if dense is not None:
        return overlay.dense_hits(dense, depth, scope, floor)
    wanted = sorted(set(terms.indices) & overlay.terms())
    if not wanted:
        return []
    return overlay.sparse_hits(terms, worktree.idf(ws, coll, wanted, overlay.generation), depth, scope, floor)


def _stable(r: Result) -> tuple[float, str, int, str]:
    return (-r.score, r.path, r.start_line, r.point_id)


def _ranked(
    ws: Workspace, branch: str, query: ranking.Query, dense: Any, terms: Any, k: int, scope: SearchFilter | None,
    off: frozenset[str], dense_scores: dict[str, float] | None = None, overlay: worktree.Overlay | None = None,
    listed: list[tuple[int, int]] | None = None,
) -> list[Result]:
    """The dense and the sparse list, fetched separately, through gitrag.query.ranking.

    Each list is read ``SCORE_DEPTH`` deep without payloads (ids and scores); only the
    candidates, each list's top ``PREFETCH``, get theirs, in one request by id.
    ``dense_scores`` gets the dense list's {id: cosine} and ``listed`` its (length, depth
    asked) as the store returned it (for gitrag.index.integrity)."""
    row = ws.state.branch(branch)
    coll, view = row.collection, row.view
    top = max(PREFETCH, k)
    depth = max(SCORE_DEPTH, top)
    read = depth + (overlay.extra_depth if overlay is not None else 0)
    dense_hits = ws.store.search(coll, dense=dense, sparse=None, limit=read, scope=scope, branch=view,
                                 with_payload=False)
    sparse_hits = ws.store.search(coll, dense=None, sparse=terms, limit=read, scope=scope, branch=view,
                                  with_payload=False) if terms else []
    if listed is not None and dense is not None:
        listed.append((len(dense_hits), read))
    lookup: Any = _Lookup(ws, branch, scope)
    # the candidates' payloads from the state's manifest rows (the store's, less membership):
    # SQLite primary-key lookups instead of the store's retrieve (BENCHMARKS.md, "Scale")
    payloads: Callable[[list[str]], dict[str, dict[str, Any]]] = ws.state.payloads
    if overlay is not None:  # the work tree's chunks join both lists before anything is ranked
        dense_hits, sparse_hits = overlay.drop(dense_hits)[:depth], overlay.drop(sparse_hits)[:depth]
        dense_hits = worktree.merge(dense_hits, _overlay_hits(ws, coll, overlay, dense, None, depth, scope,
                                                              dense_hits), depth)
        if terms:
            sparse_hits = worktree.merge(sparse_hits, _overlay_hits(ws, coll, overlay, None, terms, depth, scope,
                                                                    sparse_hits), depth)
        lookup = worktree.OverlayLookup(lookup, overlay, scope)
        payloads = lambda ids: (ws.state.payloads([i for i in ids if not overlay.owns(i)])  # noqa: E731 - one expression
                                | overlay.payloads(ids))
    unknown: list[str] = []

    def known(ids: list[str]) -> dict[str, dict[str, Any]]:  # and the listed ids no manifest row holds
        got = payloads(ids)
        unknown.extend(i for i in ids if i not in got)
        return got

    part_lists = _part_lists(ws, coll, view, query, scope) if overlay is None and "multi-query" not in off else []
    extra = [i for ids in part_lists for i in ids[:multi.PART_TOP]]
    quoted = messages.of_question(query.text, "messages" not in off, "error-lines" not in off)
    if quoted and overlay is None:  # the code that prints a quoted message: its words' own sparse list
        said = sparse.query_vector(" ".join(quoted))
        if said.indices:
            lookup.message_ids = [h.id for h in ws.store.search(coll, dense=None, sparse=said,
                                                                limit=messages.MESSAGE_DEPTH, scope=scope,
                                                                branch=view, with_payload=False)]
            extra += lookup.message_ids
    cands = candidates(dense_hits, sparse_hits, top, payloads=known, extra=extra)
    check_known(ws, row, unknown)
    if overlay is None:  # the lists as read, for the files the history prior adds (gitrag.query.ranking.history_prior)
        lookup.deep = ({h.id: float(h.score) for h in dense_hits}, {h.id: float(h.score) for h in sparse_hits})
        lookup.parts = part_lists
    ranked = ranking.rank(query, cands, k, lookup, off)
    if dense_scores is not None:
        dense_scores.update((h.id, float(h.score)) for h in dense_hits if not (overlay is not None and overlay.owns(h.id)))
    return [_from_payload(c.key, c.payload, c.score) for c in ranked]


def _part_lists(ws: Workspace, coll: str, view: Any, query: ranking.Query, scope: SearchFilter | None,
                ) -> list[list[str]]:
    """Point ids, best first, of each part of a pasted question (gitrag.query.ranking.multi): its
    dense and its sparse list, ``multi.PART_DEPTH`` deep; [] for a typed question."""
    out: list[list[str]] = []
    for text in multi.part_texts(query):
        vec = ws.embedder.embed_query(text[:DENSE_CHARS])
        out.append([h.id for h in ws.store.search(coll, dense=vec, sparse=None, limit=multi.PART_DEPTH, scope=scope,
                                                   branch=view, with_payload=False)])
        terms = sparse.query_vector(text, parts.weights(text))
        if terms.indices:
            out.append([h.id for h in ws.store.search(coll, dense=None, sparse=terms, limit=multi.PART_DEPTH,
                                                       scope=scope, branch=view, with_payload=False)])
    return out


def candidates(
    dense_hits: list[Hit], sparse_hits: list[Hit], top: int,
    payloads: Callable[[list[str]], dict[str, dict[str, Any]]] | None = None, extra: list[str] | None = None,
) -> list[ranking.Candidate]:
    """The chunks in the first ``top`` of either list (best-first hits, read deeper than
    ``top``), dense list first, each with its raw score from both lists wherever the list
    returned it at any depth: ``dense`` cosine, ``sparse`` BM25-like dot product; None only
    beyond the list.

    Payloads come from the hits, or, given ``payloads`` (point ids -> ``{id: payload}``,
    as :meth:`gitrag.index.store.base.Store.payloads`), from one call for the candidates' ids,
    for lists read without payloads; a candidate whose point is gone by then (deleted
    by a sync between the two requests) is left out. ``extra``: more point ids to take (the
    parts' lists of a pasted question), with their scores from the two lists where they hold
    them (``payloads`` required)."""
    dense_of = {h.id: float(h.score) for h in dense_hits}
    sparse_of = {h.id: float(h.score) for h in sparse_hits}
    ids = list(dict.fromkeys([*(h.id for h in dense_hits[:top] + sparse_hits[:top]), *(extra or ())]))
    payload_of: dict[str, dict[str, Any]] = {}
    if payloads is None:
        for hit in dense_hits[:top] + sparse_hits[:top]:
            payload_of.setdefault(hit.id, hit.payload)
    else:
        payload_of = payloads(ids)
    return [_candidate(i, payload_of[i], dense=dense_of.get(i), sparse=sparse_of.get(i))
            for i in ids if i in payload_of]


def _candidate(point_id: str, payload: dict[str, Any], score: float = 0.0, **scores: float) -> ranking.Candidate:
    p = payload
    return ranking.Candidate(point_id, p["path"], p["start_line"], p["end_line"], p.get("symbol", ""), p.get("kind", ""),
                             score, payload=p, **scores)


class _Lookup:
    """gitrag.query.ranking's view of the index: definitions from the symbol graph, chunks from
    the state database, paths of the branch; all within ``scope``."""

    def __init__(self, ws: Workspace, branch: str, scope: SearchFilter | None) -> None:
        self.ws, self.branch, self.scope = ws, branch, scope
        self._points: dict[str, list[Any]] = {}
        self.deep: tuple[dict[str, float], dict[str, float]] = ({}, {})  # {id: score} of the dense, sparse list
        self.parts: list[list[str]] = []  # ids, best first, of each list of a pasted question's parts (multi-query)
        self.message_ids: list[str] = []  # ids of the quoted messages' sparse list (gitrag.query.ranking.messages)

    def definitions(self, name: str, exact_case: bool) -> list[ranking.DefinitionSite]:
        found = symbols.find_definitions(self.ws, name, branch=self.branch)
        if exact_case:
            last = symbols.split_name(name)[-1:]
            found = [d for d in found if d.segments[-1:] == last]
        return [ranking.DefinitionSite(d.name, d.path, d.start_line, d.end_line) for d in found
                if not self.scope or _in_scope(d, self.scope)]

    def chunks_at(self, site: ranking.DefinitionSite) -> list[ranking.Candidate]:
        if site.path not in self._points:
            self._points[site.path] = self.ws.state.points(self.branch, [site.path])
        return [_candidate(r.point_id, r.payload) for r in self._points[site.path]
                if r.payload["start_line"] <= site.line <= r.payload["end_line"]]

    def file_candidates(self, paths: list[str]) -> list[ranking.Candidate]:
        """The chunks of ``paths`` that the dense or the sparse list returned (at the depth
        they were read to), with those raw scores; none for a file outside the scope."""
        dense_of, sparse_of = self.deep
        if not paths or not (dense_of or sparse_of):
            return []
        out = []
        listed = _Either(dense_of, sparse_of)
        for row in self.ws.state.points(self.branch, paths, only=listed):
            d, s = dense_of.get(row.point_id), sparse_of.get(row.point_id)
            if self.scope and not self.scope.admits(row.payload["path"], row.payload.get("language", "")):
                continue
            out.append(_candidate(row.point_id, row.payload, dense=d, sparse=s))
        return out

    def known_paths(self, written: str) -> list[str]:
        return ranking.written_paths(written, symbols.branch_paths(self.ws, self.branch))

    def chunk_texts(self, cands: list[ranking.Candidate]) -> dict[str, str]:
        """{key: source text} of ``cands``, read from their git blobs (each blob once); a
        chunk whose blob cannot be read is left out."""
        out: dict[str, str] = {}
        blobs: dict[str, bytes | None] = {}
        for c in cands:
            blob = c.payload.get("blob", "")
            if not blob:
                continue
            if blob not in blobs:
                try:
                    blobs[blob] = self.ws.repo.read_blob_cached(blob)
                except (KeyError, ValueError):
                    blobs[blob] = None
            data = blobs[blob]
            if data is not None:
                out[c.key] = data[c.payload.get("start_byte", 0):c.payload.get("end_byte", 0)].decode("utf-8", "replace")
        return out

    def project_names(self) -> frozenset[str]:
        return _top_folders(symbols.branch_paths(self.ws, self.branch))

    def history_prior(self, query: ranking.Query) -> dict[str, float]:
        """{path: share} of the files similar past commits changed (gitrag.query.history)."""
        from gitrag.query import history

        return history.similar_files(self.ws, self.branch, query.text, query.term_weights)


class _Either:
    """``id in`` either of two mappings (a container over both, neither copied)."""

    __slots__ = ("a", "b")

    def __init__(self, a: Mapping[str, Any], b: Mapping[str, Any]) -> None:
        self.a, self.b = a, b

    def __contains__(self, key: object) -> bool:
        return key in self.a or key in self.b


@lru_cache(maxsize=8)
def _top_folders(paths: frozenset[str]) -> frozenset[str]:
    """Lower-cased folder names at the top two levels of ``paths`` (cached per commit's set)."""
    return frozenset(part.lower() for p in paths for part in p.split("/")[:-1][:2])


def _result(hit: Hit) -> Result:
    return _from_payload(hit.id, hit.payload, float(hit.score))


def _shown(ws: Workspace, hits: list[Hit]) -> list[Result]:
    """The results of store ``hits``, their payloads the state's manifest rows where the store
    keeps only some fields (``Store.payload_fields``); a hit whose row is gone (deleted since)
    is left out. The work tree's hits (``source``) carry their whole payloads."""
    if ws.store.payload_fields is None:
        return [_result(h) for h in hits]
    rows = ws.state.payloads([h.id for h in hits if h.payload.get("source") != "worktree"])
    return [_from_payload(h.id, h.payload if h.payload.get("source") == "worktree" else rows[h.id], float(h.score))
            for h in hits if h.id in rows or h.payload.get("source") == "worktree"]


def _from_payload(point_id: str, p: dict[str, Any], score: float) -> Result:
    return Result(
        p["path"], p["start_line"], p["end_line"], p.get("symbol", ""), p.get("kind", ""), p.get("language", ""),
        round(score, 6), blob=p.get("blob", ""), start_byte=p.get("start_byte", 0), end_byte=p.get("end_byte", 0),
        point_id=point_id, source=p.get("source", "index"),
    )


def _as_candidate(r: Result) -> ranking.Candidate:
    return ranking.Candidate(r.point_id, r.path, r.start_line, r.end_line, r.symbol, r.kind, r.score)


def _expansions(ws: Workspace, branch: str, results: list[Result], hops: int, scope: SearchFilter | None,
                view: str | None = None) -> list[Result]:
    """Chunks of the definitions the top results depend on (callees, bases), best first: all of
    them (a caller keeps as many as it shows; ``search`` and ``ask`` at most ``k``)."""
    found: dict[str, Result] = {}
    parents = {r.point_id: r for r in results}

    def neighbours(c: ranking.Candidate) -> list[tuple[ranking.Candidate, int]]:
        out = []
        name = c.symbol.split(", ")[0]
        if not name or name.startswith("<"):
            return out
        deps = symbols.dependencies(ws, name, hops=hops, path=c.path)
        for link in deps["callees"] + deps["bases"]:
            d = link.definition
            if d is None or link.candidates > EXPAND_MAX_CANDIDATES or (scope and not _in_scope(d, scope)) \
                    or not callees.plausible(link, c.path, name):  # no test code, no method by its name alone
                continue
            for r in _chunks_at(ws, branch, d):
                r.expanded_from = f"{c.path}:{c.start_line}-{c.end_line}"
                found.setdefault(r.point_id, r)
                out.append((_as_candidate(r), link.hop))
        return out

    ranked = ranking.expand([_as_candidate(r) for r in results], neighbours, top=EXPAND_TOP)
    out = []
    for c in ranked:
        if c.key not in parents and c.key in found:
            found[c.key].score = round(c.score, 6)
            out.append(found[c.key])
    return out


def _in_scope(d: symbols.Definition, scope: SearchFilter) -> bool:
    return scope.admits(d.path, d.language)


def _chunks_at(ws: Workspace, branch: str, d: symbols.Definition) -> list[Result]:
    """The chunks of ``d``'s file that hold its first line."""
    rows = ws.state.points(branch, [d.path])
    return [_from_payload(r.point_id, r.payload, 0.0) for r in rows
            if r.payload["start_line"] <= d.start_line <= r.payload["end_line"]]


def read_snippet(ws: Workspace, result: Result, overlay: worktree.Overlay | None = None) -> str:
    """The result's source, sliced by bytes from its git blob (a work-tree result's from the
    file as read from disk for this search), decoded as UTF-8 (replacing errors)."""
    if overlay is not None and result.source == worktree.SOURCE:
        return overlay.snippet_of_blob(result.path, result.blob, result.start_byte, result.end_byte) or ""
    try:
        data = ws.repo.read_blob_cached(result.blob)
    except (KeyError, ValueError):
        return ""
    return data[result.start_byte : result.end_byte].decode("utf-8", "replace")


def ask(
    ws: Workspace, question: str, *, k: int = 10, mode: str = "hybrid", scope: SearchFilter | None = None,
    expand: int = 0, files: bool = False, disable: Collection[str] = (), worktree_overlay: bool = False,
    offset: int = 0, view: str | None = None, fresh: Freshness | None = None, deadline: float | None = None,
) -> AskResponse:
    """Search and wrap the results with their freshness; ``answer`` is filled by the caller.

    ``expand``: as for :func:`search`, at most ``k`` definitions after the ``k`` results.
    ``files``: also rank the top ``k`` files (gitrag.query.file_results) from ``k`` x
    CANDIDATES_PER_FILE chunk candidates; ``results`` stay the top ``k`` chunks.
    ``worktree_overlay``: search the work tree's uncommitted files too (gitrag.query.worktree;
    ``worktree`` in the JSON says what it held). ``offset``: skip that many of the best
    results (and files): results ``offset+1 .. offset+k`` of the same ranking, for paging. ``view`` and ``fresh``:
    search that view (a revision's, see gitrag.query.revisions) and report that freshness; the
    work tree is never overlaid on a view. ``deadline`` (``time.monotonic()``): the overlay embeds
    files committed since the index only until then (``worktree`` counts the rest in ``late``)."""
    overlay = overlay_for(ws, deadline) if worktree_overlay and view is None else None
    offset = max(0, offset)
    if not files:
        results = search(ws, question, k=offset + k, mode=mode, scope=scope, expand=0, snippets=False,
                         overlay=overlay, view=view, disable=disable)[offset:]
    else:
        chunks = search(ws, question, k=max((offset + k) * CANDIDATES_PER_FILE, PREFETCH), mode=mode, scope=scope,
                        snippets=False, overlay=overlay, view=view, disable=disable)
        results = chunks[offset : offset + k]
    if expand > 0:
        results += _expansions(ws, view or ws.repo.branch(), results, expand,
                               overlay.scope(scope) if overlay else scope)[:k]
    for r in results:
        r.snippet = read_snippet(ws, r, overlay)
    mark_in_head(results, overlay)
    ranked_files = rank_files(chunks, offset + k)[offset:] if files else None
    response = AskResponse(question, fresh or freshness(ws, overlay), results, None, mode, ranked_files)
    response.offset = offset
    response.worktree = _overlay_json(overlay) if worktree_overlay and view is None else None
    return response


def _overlay_json(overlay: worktree.Overlay | None) -> dict[str, Any]:
    if overlay is None:
        return {"searched": False, "files": 0, "hidden": 0, "embedded": 0, "skipped": 0, "truncated": 0,
                "in_head": 0, "late": 0}
    return {"searched": True, "files": len(overlay.files), "hidden": len(overlay.hidden), "embedded": overlay.embedded,
            "skipped": len(overlay.skipped), "truncated": overlay.truncated, "in_head": len(overlay.unindexed),
            "late": overlay.late}
