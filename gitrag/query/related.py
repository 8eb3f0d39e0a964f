"""Related code: the chunks most like the one at ``PATH:LINE``.

    the chunk holding LINE of PATH (the work tree's version when the file is uncommitted,
    gitrag.query.worktree; else the indexed one)
    -> its own chunk vector (cached; no path mixed in, so a copy in another file is as near
       as one beside it) and its text's terms as a sparse query
    -> the dense and the sparse list, read as a question's are (SCORE_DEPTH deep, the work
       tree's chunks merged in), fused by the ranking's score fusion (w = 0.5) and taken
       greedily with file saturation, the chunk itself and the other pieces of its definition
       left out (a long function cut into pieces is one place, gitrag.query.ranking.pieces)
    -> ranked results with snippets, like ``ask``'s

The question-reading stages (definitions, path priors, prose) are not applied: they read a
question's words, and a chunk is not a question.
"""

from __future__ import annotations

import numpy as np

from gitrag.errors import BadUsage, EmbedderMismatch, NotIndexed
from gitrag.git import quoting
from gitrag.index import sparse
from gitrag.index.embedders import l2_normalise
from gitrag.index.store import SearchFilter
from gitrag.index.workspace import Workspace
from gitrag.query import worktree
from gitrag.query.ranking import stages
from gitrag.query.ranking.pieces import pieces_of
from gitrag.query.retrieval import (
    PREFETCH,
    SCORE_DEPTH,
    AskResponse,
    Result,
    _from_payload,
    _overlay_json,
    candidates,
    freshness,
    mark_in_head,
    overlay_for,
    read_snippet,
)


def parse_location(text: str) -> tuple[str, int]:
    """``'src/app.py:42'`` -> ``('src/app.py', 42)``; a PATH quoted as git and gitrag's output
    quote one (``'"a\\nb.py":3'``, gitrag.git.quoting) is unquoted to the index's spelling.
    Raises BadUsage (exit 2) for anything else."""
    path, sep, line = text.strip().rpartition(":")
    if not sep or not path or not line.isdigit() or int(line) < 1:
        raise BadUsage(f"expected PATH:LINE (a repository-relative path and a line from 1), not {text!r}")
    try:
        path = quoting.unquote(path)
    except ValueError as exc:
        raise BadUsage(str(exc)) from None
    return path.removeprefix("./"), int(line)


def related(ws: Workspace, path: str, line: int, *, k: int = 10, scope: SearchFilter | None = None,
            worktree_overlay: bool = True, offset: int = 0) -> tuple[AskResponse, Result]:
    """The ``k`` chunks most like the chunk at ``path``:``line`` (after ``offset``), best
    first, within ``scope``; the response's ``question`` is ``path:line`` and ``source`` (see
    :class:`Result`) names where each came from; also the located chunk itself. Raises NotIndexed (branch
    not indexed, or no chunk there: not tracked, skipped, past its end), EmbedderMismatch."""
    name = ws.repo.branch()
    ws.repo.require_head()
    branch = ws.state.branch(name)
    if branch is None or not branch.materialized or not ws.store.has_collection(branch.collection):
        raise NotIndexed(f"branch {name!r} is not indexed yet; run `gitrag index` first")
    if branch.fingerprint != ws.embedder.fingerprint:
        raise EmbedderMismatch(f"branch {name!r} was indexed with embedder {branch.fingerprint}, but "
                               f"{ws.embedder.fingerprint} is configured; run `gitrag index --rebuild`")
    built = overlay_for(ws) if worktree_overlay else None
    overlay = built if built is not None and built.active else None
    here, chunk_hash, own = _located(ws, name, path, line, overlay)
    text = read_snippet(ws, here, overlay)
    vec = ws.state.get_vectors([chunk_hash], branch.fingerprint).get(chunk_hash)
    if vec is None:
        vec = ws.embedder.embed_documents([text])[0]
    dense = l2_normalise(np.asarray(vec, dtype=np.float32)[None, :])[0]
    terms = sparse.query_vector(text)
    if scope is not None and scope.exclude:
        scope = scope.resolve(ws.state.files(name))
    if overlay is not None:
        scope = overlay.scope(scope)
    coll, view = branch.collection, branch.view
    want = offset + k + 1
    depth = max(SCORE_DEPTH, want)
    read = depth + (overlay.extra_depth if overlay is not None else 0)
    dense_hits = ws.store.search(coll, dense=dense, sparse=None, limit=read, scope=scope, branch=view,
                                 with_payload=False)
    sparse_hits = ws.store.search(coll, dense=None, sparse=terms, limit=read, scope=scope, branch=view,
                                  with_payload=False) if terms.indices else []
    # the manifest rows: the store may keep only the filter fields (Store.payload_fields)
    payloads = lambda ids: ws.state.payloads(ids)  # noqa: E731 - one expression, rebound with an overlay
    if overlay is not None:
        dense_hits, sparse_hits = overlay.drop(dense_hits)[:depth], overlay.drop(sparse_hits)[:depth]
        dense_hits = worktree.merge(dense_hits, overlay.dense_hits(dense, depth, scope), depth)
        wanted = sorted(set(terms.indices) & overlay.terms())
        if wanted:
            found = overlay.sparse_hits(terms, worktree.idf(ws, coll, wanted, overlay.generation), depth, scope)
            sparse_hits = worktree.merge(sparse_hits, found, depth)
        payloads = lambda ids: (ws.state.payloads([i for i in ids if not overlay.owns(i)])  # noqa: E731 - one expression
                                | overlay.payloads(ids))
    # the chunk's own definition is left out whole: a function cut into pieces is one place, and
    # its other pieces, sharing its names and words, would rank first (cobra's Command.ExecuteC)
    cands = {c.key: c for c in candidates(dense_hits, sparse_hits, max(PREFETCH, want), payloads=payloads)
             if c.key not in own}
    if not cands:
        ranked = []
    else:
        stages.fuse(cands, stages.DENSE_WEIGHT)
        ranked = stages.select(cands, offset + k)[offset:]
    results = [_from_payload(c.key, c.payload, c.score) for c in ranked]
    for r in results:
        r.snippet = read_snippet(ws, r, overlay)
    mark_in_head([*results, here], overlay)
    response = AskResponse(f"{path}:{line}", freshness(ws, built), results, None, "hybrid")
    response.offset = offset
    response.worktree = _overlay_json(built)
    here.snippet = text
    return response, here


def to_json(response: AskResponse, located: Result) -> dict:
    """The ``gitrag related --json`` object: ask's fields (``question`` is ``PATH:LINE``,
    ``answer`` null) plus ``located``, the chunk at that location (a result with score 0)."""
    out = response.to_json()
    out["located"] = located.to_json()
    return out


def _located(ws: Workspace, branch: str, path: str, line: int,
             overlay: worktree.Overlay | None) -> tuple[Result, str, set[str]]:
    """The chunk holding ``line`` of ``path`` (the work tree's when ``overlay`` has the file),
    its chunk hash, and the keys of the pieces of the definition it is a piece of, itself
    included (gitrag.query.ranking.pieces.pieces_of)."""
    if overlay is not None and path in overlay.files:
        rows = [(worktree.overlay_key(path, i), p) for i, p in enumerate(overlay.files[path].payloads)]
    elif overlay is not None and path in overlay.hidden:
        raise NotIndexed(f"{path} is deleted in the work tree (or skipped now); give a file that exists")
    else:
        rows = [(r.point_id, r.payload) for r in ws.state.points(branch, [path])]
    if not rows:
        raise NotIndexed(f"{path!r} has no chunks in the index of branch {branch!r} (not tracked, skipped or "
                         f"not indexed yet)")
    inside = [(pid, p) for pid, p in rows if p["start_line"] <= line <= p["end_line"]]
    if not inside:
        last = max(p["end_line"] for _, p in rows)
        raise NotIndexed(f"no chunk of {path} holds line {line} (its chunks end at line {last}; blank lines at "
                         f"its end are in none)")
    pid, p = min(inside, key=lambda item: item[1]["end_line"] - item[1]["start_line"])
    return _from_payload(pid, p, 0.0), p.get("chunk_hash", ""), pieces_of(rows, pid)
