"""The work-tree overlay: uncommitted files searched together with the branch's index.

    git status (HEAD vs work tree, untracked not ignored) + diff(indexed commit, HEAD)
    -> each path whose bytes on disk differ from the indexed blob (by git's blob id of them)
    -> hidden: its committed points are left out of the store's lists (``excluded_paths``)
    -> read from disk, judged by the file policy (work-tree ``.gitragignore``), chunked
    -> vectors from the vector cache by chunk SHA-256, embed only the misses (and cache them)
    -> in-memory dense (dot product, as the store's cosine) and sparse lists (the store's own
       IDF for each query term), merged into the same candidate lists the ranking fuses

So an edited file answers with its new code, a deleted or renamed-away one no longer
answers, and a new untracked file answers at once; every such result carries
``source="worktree"`` and its snippet comes from the file on disk. A file's chunks and
vectors are kept in a small in-process LRU by (path, blob id), so in a long-lived process
(the daemon, ``gitrag mcp``'s daemon) a second ask re-reads and hashes the dirty files only.
At most MAX_FILES paths are overlaid per ask (the rest are counted in ``truncated``).
"""

from __future__ import annotations

import math
import os
import stat
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pathspec
import pygit2
from pygit2.enums import FileStatus

from gitrag import sparse
from gitrag.chunking import CHUNKER_VERSION, analyze
from gitrag.embedders.base import embed_partial
from gitrag.gitrepo import Entry
from gitrag.policy import _DEFAULTS, IGNORE_FILE, Policy
from gitrag.state import Branch
from gitrag.store import Hit, SearchFilter, SparseVec
from gitrag.symbols import Definition, SymbolIndex
from gitrag.vectors import VERSION as VECTORS_VERSION
from gitrag.vectors import combine, path_vectors
from gitrag.workspace import Workspace

SOURCE = "worktree"
KEY_PREFIX = "worktree:"  # overlay candidates' keys; never a store point id (those are UUIDs)
MAX_FILES = 300  # paths overlaid per ask; an untracked build folder must not be embedded on an ask
CACHE_FILES = 2048  # files kept chunked and embedded in the process
_NS = uuid.UUID("0b7c3d4e-8f61-4a2b-9c5d-1e2f3a4b5c6d")


@dataclass
class OverlayFile:
    """One work-tree file as chunked and embedded: payloads like a point's (plus
    ``source``), combined dense vectors (n, dim) and sparse weights with its path's terms."""

    path: str
    blob: str  # git's blob id of the bytes on disk (not in the object database)
    data: bytes
    payloads: list[dict[str, Any]]
    dense: np.ndarray
    sparse: list[dict[int, float]]
    definitions: list[Definition]


@dataclass
class Overlay:
    """What the work tree changes in one branch's index, for one search.

    ``hidden``: indexed paths whose committed points must not answer (deleted, modified,
    renamed away, now skipped); ``files``: the overlaid files; ``changes``: work-tree
    files that differ from HEAD (git status); ``embedded``: chunks embedded for this
    overlay now; ``skipped``: ``{path: reason}`` for dirty files the policy skips;
    ``truncated``: dirty paths beyond MAX_FILES, left as indexed."""

    hidden: frozenset[str] = frozenset()
    files: dict[str, OverlayFile] = field(default_factory=dict)
    changes: int = 0
    embedded: int = 0
    skipped: dict[str, str] = field(default_factory=dict)
    truncated: int = 0
    _keys: dict[str, tuple[OverlayFile, int]] = field(default_factory=dict, repr=False)
    _graph: SymbolIndex | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for f in self.files.values():
            for i, p in enumerate(f.payloads):
                self._keys[p["point_id"]] = (f, i)

    @property
    def active(self) -> bool:
        return bool(self.hidden or self.files)

    # -- scope and payloads -------------------------------------------------------------
    def scope(self, scope: SearchFilter | None) -> SearchFilter | None:
        """``scope`` with the hidden paths added to ``excluded_paths`` (the store leaves
        them out of each list, so ``k`` results still come back)."""
        if not self.hidden:
            return scope
        base = scope or SearchFilter()
        paths = tuple(sorted(set(base.excluded_paths) | self.hidden))
        return SearchFilter(base.path_prefix, base.language, base.exclude, paths)

    def owns(self, key: str) -> bool:
        return key in self._keys

    def payload(self, key: str) -> dict[str, Any]:
        f, i = self._keys[key]
        return f.payloads[i]

    def payloads(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        return {k: self.payload(k) for k in keys if k in self._keys}

    def snippet(self, key: str, start_byte: int, end_byte: int) -> str | None:
        """The bytes ``[start_byte, end_byte)`` of the overlaid file ``key`` belongs to, as read
        from disk for this search; None when ``key`` is not an overlay chunk."""
        got = self._keys.get(key)
        if got is None:
            return None
        return got[0].data[start_byte:end_byte].decode("utf-8", "replace")

    def snippet_of_blob(self, path: str, blob: str, start_byte: int, end_byte: int) -> str | None:
        f = self.files.get(path)
        if f is None or f.blob != blob:
            return None
        return f.data[start_byte:end_byte].decode("utf-8", "replace")

    # -- the two lists ---------------------------------------------------------------------
    def _admitted(self, scope: SearchFilter | None) -> list[tuple[OverlayFile, int]]:
        return [(f, i) for f in self.files.values() for i, p in enumerate(f.payloads)
                if scope is None or scope.admits(p["path"], p.get("language", ""))]

    def dense_hits(self, query: np.ndarray, limit: int, scope: SearchFilter | None) -> list[Hit]:
        """The overlay's chunks by cosine to ``query`` (float32 (dim,), normalised, as the
        store's dense list), best first, at most ``limit``."""
        hits = []
        for f in self.files.values():
            if not f.payloads:
                continue
            scores = f.dense @ np.asarray(query, dtype=np.float32)
            for i, p in enumerate(f.payloads):
                if scope is None or scope.admits(p["path"], p.get("language", "")):
                    hits.append(Hit(p["point_id"], float(scores[i]), p))
        return sorted(hits, key=lambda h: (-h.score, h.id))[:limit]

    def sparse_hits(self, terms: SparseVec, idf: dict[int, float], limit: int,
                    scope: SearchFilter | None) -> list[Hit]:
        """The overlay's chunks by the store's sparse score, ``sum(q_t * idf_t * w_t)`` (see
        :func:`idf`), best first; chunks sharing no term with the query are left out."""
        query = dict(zip(terms.indices, terms.values))
        hits = []
        for f, i in self._admitted(scope):
            w = f.sparse[i]
            score = sum(q * idf.get(t, 0.0) * w[t] for t, q in query.items() if t in w)
            if score > 0:
                p = f.payloads[i]
                hits.append(Hit(p["point_id"], float(score), p))
        return sorted(hits, key=lambda h: (-h.score, h.id))[:limit]

    def terms(self) -> set[int]:
        """Every term id in the overlay's sparse vectors."""
        return {t for f in self.files.values() for w in f.sparse for t in w}

    # -- the symbol graph -------------------------------------------------------------------
    def graph(self) -> SymbolIndex:
        if self._graph is None:
            defs = [d for f in self.files.values() for d in f.definitions]
            self._graph = SymbolIndex(self.files, defs, [])
        return self._graph


def merge(store_hits: list[Hit], overlay_hits: list[Hit], limit: int) -> list[Hit]:
    """One best-first list of store and overlay hits (scores on the same scale), at most ``limit``."""
    if not overlay_hits:
        return store_hits[:limit]
    return sorted(store_hits + overlay_hits, key=lambda h: -h.score)[:limit]


# -- building it ----------------------------------------------------------------------------

_cache: OrderedDict[tuple[str, ...], OverlayFile] = OrderedDict()
_cache_lock = threading.Lock()


def dirty_paths(ws: Workspace, branch: Branch | None) -> tuple[list[str], int]:
    """(paths that may differ from the branch's indexed commit, work-tree files that differ
    from HEAD). The first are git status's changed and untracked-not-ignored files, plus the
    paths changed between the indexed commit and HEAD; each is checked against the indexed
    blob by the caller."""
    repo = ws.repo
    if repo.workdir is None:
        return [], 0
    try:
        status = repo.repo.status(untracked_files="all")
    except pygit2.GitError:
        return [], 0
    changed = {p for p, flags in status.items() if flags != FileStatus.CURRENT and not flags & FileStatus.IGNORED}
    paths = set(changed)
    head = repo.head()
    old = branch.indexed_commit if branch else None
    if old and head and old != head and repo.has_commit(old):
        paths |= {e.path for c in repo.diff(old, head) for e in (c.old, c.new) if e is not None}
    return sorted(paths), len(changed)


class _WorktreePolicy(Policy):
    """The file policy with the work tree's ``.gitragignore`` (what the next commit will hold)."""

    def __init__(self, ws: Workspace, commit: str) -> None:
        self._root = ws.repo.root
        super().__init__(ws.repo, commit, ws.settings.max_file_bytes, None)

    def _load_ignore(self) -> pathspec.PathSpec:
        try:
            lines = (self._root / IGNORE_FILE).read_text("utf-8", "replace").splitlines()
        except OSError:
            lines = []
        return pathspec.PathSpec.from_lines("gitignore", [*_DEFAULTS, *lines])


def build(ws: Workspace, branch: Branch, variant: str = "") -> Overlay:
    """The overlay of the work tree over ``branch``'s index (see the module doc).

    Reads files of the work tree only under its root; a file that cannot be read is
    skipped with its reason (its committed points hidden). Raises what the embedder raises
    as a whole (EmbedderUnavailable)."""
    paths, changes = dirty_paths(ws, branch)
    if not paths:
        return Overlay(changes=changes)
    manifest = ws.state.files(branch.name)
    root = ws.repo.root
    head = ws.repo.head() or branch.indexed_commit
    policy = _WorktreePolicy(ws, head) if head else None
    hidden: set[str] = set()
    todo: list[tuple[str, str, bytes, int]] = []
    skipped: dict[str, str] = {}
    truncated = 0
    for path in paths:
        known = manifest.get(path)
        disk = root / path
        try:
            info = os.lstat(disk)
        except OSError:
            info = None
        if info is None or stat.S_ISDIR(info.st_mode):
            if known is not None:  # deleted (or renamed away) in the work tree
                hidden.add(path)
            continue
        mode = 0o120000 if stat.S_ISLNK(info.st_mode) else (0o100755 if info.st_mode & 0o111 else 0o100644)
        if mode == 0o100644 or mode == 0o100755:
            if info.st_size > ws.settings.max_file_bytes:
                data, blob = b"", ""
            else:
                try:
                    data = disk.read_bytes()
                except OSError as exc:
                    skipped[path] = f"unreadable: {exc.strerror or exc}"
                    if known is not None:
                        hidden.add(path)
                    continue
                blob = str(pygit2.hash(data))
        else:
            data, blob = b"", ""
        if known is not None and blob and known.blob == blob:
            continue  # the same bytes as indexed (edited and edited back, or committed and indexed)
        if known is not None:
            hidden.add(path)
        reason = _reason(policy, path, blob, mode, info.st_size, data)
        if reason:
            skipped[path] = reason
            continue
        if len(todo) >= MAX_FILES:
            truncated += 1
            hidden.discard(path)  # left as indexed: better stale than missing
            continue
        todo.append((path, blob, data, mode))
    files, embedded = _files(ws, todo, variant)
    return Overlay(frozenset(hidden), files, changes, embedded, skipped, truncated)


def _reason(policy: Policy | None, path: str, blob: str, mode: int, size: int, data: bytes) -> str | None:
    if policy is None:
        return None
    reason = policy.by_path(Entry(path, blob, mode))
    if reason:
        return reason
    reason = policy.by_size(size)
    return reason or policy.by_content(data, path)


def _files(ws: Workspace, todo: list[tuple[str, str, bytes, int]], variant: str) -> tuple[dict[str, OverlayFile], int]:
    """The overlaid files, from the process cache or chunked and embedded now."""
    emb = ws.embedder
    fp = emb.fingerprint
    out: dict[str, OverlayFile] = {}
    fresh: list[tuple[tuple[str, ...], str, str, bytes, Any]] = []
    for path, blob, data, _mode in todo:
        key = (str(ws.data_dir), fp, CHUNKER_VERSION, sparse.VERSION, VECTORS_VERSION, path, blob)
        with _cache_lock:
            got = _cache.get(key)
            if got is not None:
                _cache.move_to_end(key)
        if got is not None:
            out[path] = got
            continue
        fresh.append((key, path, blob, data, analyze(path, data, max_tokens=emb.max_tokens,
                                                     count_tokens=emb.count_tokens)))
    if not fresh:
        return out, 0
    chunks = [(path, c) for _, path, _, _, a in fresh for c in a.chunks if c.embeddable]
    hashes = list(dict.fromkeys(c.hash for _, c in chunks))
    vectors = ws.state.get_vectors(hashes, fp)
    texts = {c.hash: (c.text, c.span) for _, c in chunks}
    todo_h = [h for h in hashes if h not in vectors]
    embedded = 0
    if todo_h:
        got, failed = embed_partial(emb, [texts[h][0] for h in todo_h], [texts[h][1] for h in todo_h])
        new = {h: got[i] for i, h in enumerate(todo_h) if i not in set(failed)}
        ws.state.put_vectors(new, fp)
        vectors.update(new)
        embedded = len(new)
    sparse_of = ws.state.get_sparse(hashes, sparse.VERSION)
    new_sparse = {h: sparse.document_vector(texts[h][0]) for h in hashes if h not in sparse_of}
    if new_sparse:
        ws.state.put_sparse(new_sparse, sparse.VERSION)
        sparse_of.update(new_sparse)
    path_vecs, _ = path_vectors(ws.state, emb, fp, [path for _, path, _, _, _ in fresh])
    for key, path, blob, data, analysis in fresh:
        payloads, dense_rows, sparse_rows = [], [], []
        for c in analysis.chunks:
            if not c.embeddable or c.hash not in vectors:
                continue
            payload = {
                "path": path, "blob": blob, "start_byte": c.start_byte, "end_byte": c.end_byte,
                "start_line": c.start_line, "end_line": c.end_line, "symbol": c.symbol, "kind": c.kind,
                "language": c.language, "chunk_hash": c.hash, "source": SOURCE,
                "point_id": KEY_PREFIX + str(uuid.uuid5(_NS, f"{variant}\0{path}\0{blob}\0{c.start_byte}\0{c.hash}")),
            }
            if c.prose:
                payload["prose"] = c.prose
            payloads.append(payload)
            dense_rows.append(combine(vectors[c.hash], path_vecs[path]))
            vec = sparse.with_path(sparse_of[c.hash], path)
            sparse_rows.append(dict(zip(vec.indices, vec.values)))
        dim = emb.dim
        matrix = np.stack(dense_rows).astype(np.float32) if dense_rows else np.zeros((0, dim), np.float32)
        defs = [Definition(path, d.start_line, d.end_line, d.name, d.kind, d.parent, analysis.language)
                for d in analysis.definitions]
        f = OverlayFile(path, blob, data, payloads, matrix, sparse_rows, defs)
        out[path] = f
        with _cache_lock:
            _cache[key] = f
            while len(_cache) > CACHE_FILES:
                _cache.popitem(last=False)
    return out, embedded


# -- the store's IDF ---------------------------------------------------------------------------

_idf_cache: OrderedDict[tuple[str, int, int], float] = OrderedDict()


def idf(ws: Workspace, collection: str, term_ids: list[int]) -> dict[int, float]:
    """The IDF the store applies to each term (Qdrant's ``Modifier.IDF``:
    ``ln(1 + (N - n + 0.5) / (n + 0.5))``, N points, n of them holding the term), so an
    overlay chunk's sparse score is on the scale of the store's own.

    Read back from the store, not recounted: a one-term query's best hit scores
    ``idf * w`` where ``w`` is that point's weight (its cached sparse vector plus its
    path's terms); a term no point holds gets the formula with n = 0. Memoised per
    (collection, point count, term)."""
    n_points = ws.store.count(collection)
    out: dict[int, float] = {}
    probe: dict[int, Hit] = {}
    for t in term_ids:
        key = (collection, n_points, t)
        if key in _idf_cache:
            out[t] = _idf_cache[key]
            continue
        hits = ws.store.search(collection, dense=None, sparse=SparseVec([t], [1.0]), limit=1, branch=None)
        if hits:
            probe[t] = hits[0]
        else:
            out[t] = math.log(1 + (n_points + 0.5) / 0.5)
    if probe:
        cached = ws.state.get_sparse([h.payload.get("chunk_hash", "") for h in probe.values()], sparse.VERSION)
        for t, hit in probe.items():
            vec = cached.get(hit.payload.get("chunk_hash", ""))
            w = dict(zip(*_with_path(vec, hit.payload.get("path", "")))).get(t) if vec else None
            out[t] = hit.score / w if w else math.log(1 + (n_points + 0.5) / 0.5)
    for t in term_ids:
        _idf_cache[(collection, n_points, t)] = out[t]
    while len(_idf_cache) > 65536:
        _idf_cache.popitem(last=False)
    return out


def _with_path(vec: SparseVec, path: str) -> tuple[list[int], list[float]]:
    full = sparse.with_path(vec, path)
    return full.indices, full.values


def is_overlay_key(key: str) -> bool:
    return key.startswith(KEY_PREFIX)


def worktree_path(ws: Workspace, path: str) -> Path:
    return ws.repo.root / path


class OverlayLookup:
    """gitrag.ranking's view of the index with the overlay on top: definitions and chunks of
    hidden paths are gone, those of overlaid files come from the overlay (``base``: the
    branch's own lookup, see gitrag.retrieval)."""

    def __init__(self, base: Any, overlay: Overlay, scope: SearchFilter | None) -> None:
        self.base, self.overlay, self.scope = base, overlay, scope

    def definitions(self, name: str, exact_case: bool) -> list[Any]:
        from gitrag import ranking
        from gitrag.symbols import split_name

        found = [d for d in self.base.definitions(name, exact_case) if d.path not in self.overlay.hidden]
        extra = self.overlay.graph().find(name)
        if exact_case:
            last = split_name(name)[-1:]
            extra = [d for d in extra if d.segments[-1:] == last]
        return found + [ranking.DefinitionSite(d.name, d.path, d.start_line, d.end_line) for d in extra
                        if self.scope is None or self.scope.admits(d.path, d.language)]

    def chunks_at(self, site: Any) -> list[Any]:
        from gitrag import ranking

        f = self.overlay.files.get(site.path)
        if f is not None:
            return [ranking.Candidate(p["point_id"], p["path"], p["start_line"], p["end_line"], p.get("symbol", ""),
                                      p.get("kind", ""), 0.0, payload=p)
                    for p in f.payloads if p["start_line"] <= site.line <= p["end_line"]]
        if site.path in self.overlay.hidden:
            return []
        return self.base.chunks_at(site)

    def known_paths(self, written: str) -> list[str]:
        from gitrag import ranking

        base = [p for p in self.base.known_paths(written) if p not in self.overlay.hidden]
        return sorted(set(base) | set(ranking.written_paths(written, frozenset(self.overlay.files))))

    def project_names(self) -> frozenset[str]:
        return self.base.project_names()
