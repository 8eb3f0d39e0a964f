"""The sync algorithm: bring one branch's collection to its HEAD at a cost proportional to
what changed.

    diff(last indexed commit, HEAD) with renames  (or manifest vs tree when the old commit is gone)
    -> read touched blobs, skip by policy, chunk
    -> vectors from the cache by (chunk SHA-256, embedder fingerprint), embed only the misses
    -> journal the touched paths; upsert new points, set payloads that moved, delete orphans; flush
    -> one SQLite transaction: manifest of the touched paths + the new indexed commit

A crash anywhere leaves the journal; the next sync first restores every journaled path
in the store from the manifest and the cache, so the collection always converges to the
manifest. A branch seen for the first time starts from the manifest of its nearest indexed
branch (by merge-base distance) and applies the diff.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
import structlog

from gitrag import sparse
from gitrag.chunking import CHUNKER_VERSION, FileAnalysis, analyze
from gitrag.errors import EmbedderMismatch
from gitrag.gitrepo import Entry
from gitrag.policy import IGNORE_FILE, Policy
from gitrag.policy import VERSION as POLICY_VERSION
from gitrag.state import Branch, FileUpdate, PointRow
from gitrag.store import PointRecord
from gitrag.vectors import VERSION as VECTORS_VERSION
from gitrag.vectors import combine, path_vectors
from gitrag.workspace import Workspace

log = structlog.get_logger("gitrag.indexer")

Progress = Callable[[str, int, int], None]  # (stage, done, total)
UPSERT_BATCH = 256
CACHE_BATCH = 1024  # embedded vectors written to the cache per transaction (or each second)
# Everything that shapes a point besides the commit: a change makes the next sync
# re-chunk every path and rewrite every point (vectors come from the caches).
PIPELINE_VERSION = f"{CHUNKER_VERSION}/{sparse.VERSION}/{VECTORS_VERSION}"
_POINT_NS = uuid.UUID("6b1d9a52-3c1e-4f7e-9a55-0f0c2b7e9d11")


@dataclass
class IndexSummary:
    """The result of one sync; the first twelve fields are the CLI contract's JSON."""

    repo: str
    branch: str
    commit: str
    files_indexed: int = 0
    files_skipped: int = 0
    files_deleted: int = 0
    chunks_total: int = 0
    chunks_embedded: int = 0
    chunks_reused: int = 0
    points_upserted: int = 0
    points_deleted: int = 0
    seconds: float = 0.0
    previous_commit: str | None = None
    started_from: str | None = None
    payloads_updated: int = 0
    paths_embedded: int = 0
    chunks_failed: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def point_id(path: str, chunk_hash: str, ordinal: int) -> str:
    """Stable id of a chunk occurrence: same path, text and repeat ordinal -> same point."""
    return str(uuid.uuid5(_POINT_NS, f"{path}\0{chunk_hash}\0{ordinal}"))


def _rows_for(entry: Entry, analysis: FileAnalysis) -> list[PointRow]:
    seen: dict[str, int] = {}
    rows = []
    for chunk in analysis.chunks:
        if not chunk.embeddable:  # content-free: it tiles the file but is never a point
            continue
        h = chunk.hash
        ordinal = seen.get(h, 0)
        seen[h] = ordinal + 1
        payload = {
            "path": entry.path, "blob": entry.blob, "start_byte": chunk.start_byte, "end_byte": chunk.end_byte,
            "start_line": chunk.start_line, "end_line": chunk.end_line, "symbol": chunk.symbol,
            "kind": chunk.kind, "language": chunk.language, "chunk_hash": h,
        }
        rows.append(PointRow(point_id(entry.path, h, ordinal), entry.path, h, payload))
    return rows


class Indexer:
    """Runs syncs for one :class:`Workspace`; ``progress`` gets (stage, done, total) calls."""

    def __init__(self, ws: Workspace, progress: Progress | None = None) -> None:
        self.ws = ws
        self.progress = progress or (lambda stage, done, total: None)
        self._texts: dict[str, str] = {}  # chunk hash -> embedding text, for this sync
        self._embedded: set[str] = set()  # hashes embedded in this sync
        self._path_failed: set[str] = set()  # paths whose path text failed to embed: retried next sync
        self._sparse: dict[str, Any] = {}  # chunk hash -> sparse vector, during one _apply

    @property
    def pipeline(self) -> str:
        """PIPELINE_VERSION plus the settings that decide which files are indexed."""
        return f"{PIPELINE_VERSION}/max{self.ws.settings.max_file_bytes}/policy{POLICY_VERSION}"

    # -- entry point ------------------------------------------------------------
    def sync(self, rebuild: bool = False) -> IndexSummary:
        """Bring the current branch's index to HEAD. Raises EmptyRepository on an unborn
        branch, EmbedderMismatch when the branch was indexed with another embedder (unless
        ``rebuild``), EmbedderUnavailable / StoreError when those fail (nothing advances)."""
        t0 = time.perf_counter()
        repo = self.ws.repo
        head = repo.require_head()
        name = repo.branch()
        summary = IndexSummary(str(repo.root), name, head)
        branch = self._prepare_branch(name, head, rebuild, summary)
        summary.previous_commit = branch.indexed_commit
        self.ws.state.touch_branch(name)
        repaired = self._repair(branch)
        if branch.indexed_commit == head and not repaired and branch.chunker == self.pipeline:
            summary.chunks_total = self.ws.state.point_count(name)
            summary.seconds = round(time.perf_counter() - t0, 3)
            return summary
        touched = self._touched(branch, head) | repaired
        self._apply(branch, head, touched, summary, rewrite=branch.chunker != self.pipeline)
        summary.chunks_total = self.ws.state.point_count(name)
        summary.seconds = round(time.perf_counter() - t0, 3)
        log.info("synced", **{k: v for k, v in summary.to_json().items() if k != "skipped"})
        return summary

    # -- branch set-up ------------------------------------------------------------
    def _prepare_branch(self, name: str, head: str, rebuild: bool, summary: IndexSummary) -> Branch:
        state, fp = self.ws.state, self.ws.embedder.fingerprint
        branch = state.branch(name)
        if branch is not None and (rebuild or branch.fingerprint != fp):
            if not rebuild:
                raise EmbedderMismatch(
                    f"branch {name!r} was indexed with embedder {branch.fingerprint}, but {fp} is configured; "
                    f"run `gitrag index --rebuild` to re-embed, or switch the embedder back"
                )
            self.ws.store.drop_collection(branch.collection)
            state.drop_branch(name)
            branch = None
        if branch is None:
            base = self._nearest_indexed(head, fp)
            collection = self.ws.collection(name)
            self.ws.store.drop_collection(collection)
            branch = state.create_branch(name, collection, fp, copy_from=base.name if base else None)
            summary.started_from = base.name if base else None
        if not self.ws.store.has_collection(branch.collection):
            self.ws.store.create_collection(branch.collection, self.ws.embedder.dim)
            if state.point_count(name):
                self._materialize(branch)
        return branch

    def _nearest_indexed(self, head: str, fingerprint: str) -> Branch | None:
        repo, best, best_dist = self.ws.repo, None, None
        for cand in self.ws.state.branches():
            if cand.fingerprint != fingerprint or not repo.has_commit(cand.indexed_commit):
                continue
            if repo.merge_base(cand.indexed_commit, head) is None:  # type: ignore[arg-type]
                continue
            dist = repo.distance(cand.indexed_commit, head)  # type: ignore[arg-type]
            if best_dist is None or dist < best_dist:
                best, best_dist = cand, dist
        return best

    def _materialize(self, branch: Branch) -> None:
        """Rebuild a dropped collection from the manifest and the vector cache: no embedding."""
        rows = self.ws.state.points(branch.name)
        missing = self._upsert_rows(branch, rows)
        if missing:  # vectors gone from the cache: re-index those paths
            self.ws.state.write_journal(branch.name, missing)
        self.ws.store.flush(branch.collection)

    def _repair(self, branch: Branch) -> set[str]:
        """Undo a crashed sync: restore journaled paths in the store from the manifest."""
        paths = self.ws.state.journal_paths(branch.name)
        if not paths:
            return set()
        log.warning("repairing after an interrupted sync", branch=branch.name, paths=len(paths))
        for path in paths:
            self.ws.store.delete_path(branch.collection, path)
        self._upsert_rows(branch, self.ws.state.points(branch.name, paths))
        self.ws.store.flush(branch.collection)
        return set(paths)

    def _upsert_rows(self, branch: Branch, rows: list[PointRow]) -> set[str]:
        """Upsert manifest rows from cached vectors; returns paths whose vectors are missing."""
        hashes = [r.chunk_hash for r in rows]
        dense = self.ws.state.get_vectors(hashes, branch.fingerprint)
        sparse_vecs = self.ws.state.get_sparse(hashes, sparse.VERSION)
        missing = {r.path for r in rows if r.chunk_hash not in dense or r.chunk_hash not in sparse_vecs}
        kept = [r for r in rows if r.path not in missing]
        paths, _ = path_vectors(self.ws.state, self.ws.embedder, branch.fingerprint, (r.path for r in kept),
                                self._path_failed)
        records = [_record(r, dense, sparse_vecs, paths) for r in kept]
        for i in range(0, len(records), UPSERT_BATCH):
            self.ws.store.upsert(branch.collection, records[i : i + UPSERT_BATCH])
            self.progress("restore", min(i + UPSERT_BATCH, len(records)), len(records))
        return missing

    # -- what changed -------------------------------------------------------------
    def _touched(self, branch: Branch, head: str) -> set[str]:
        """Paths whose indexed state may differ from HEAD."""
        repo, old = self.ws.repo, branch.indexed_commit
        known = self.ws.state.files(branch.name)
        if known and branch.chunker != self.pipeline:  # new chunks, vectors or policy: every path again
            return set(known) | {e.path for e in repo.files(head)}
        if old and repo.has_commit(old):
            touched = {e.path for c in repo.diff(old, head) for e in (c.old, c.new) if e is not None}
            if not any(_is_policy_file(p) for p in touched):
                return touched
            # .gitragignore or .gitattributes changed: every path is judged again
            return set(known) | {e.path for e in repo.files(head)}
        # first index, or the old commit is gone (force-push + gc): compare manifest and tree
        now = {e.path: e.blob for e in repo.files(head)}
        return {p for p in set(known) | set(now) if p not in known or known[p].blob != now.get(p)}

    # -- apply ----------------------------------------------------------------------
    def _apply(self, branch: Branch, head: str, touched: set[str], summary: IndexSummary, rewrite: bool) -> None:
        """Index ``touched`` paths; ``rewrite`` writes every point again (the pipeline changed)."""
        ws = self.ws
        entries = {e.path: e for e in ws.repo.files(head)}
        policy = Policy(ws.repo, head, ws.settings.max_file_bytes, list(entries.values()))
        old_rows: dict[str, list[PointRow]] = {}
        for row in ws.state.points(branch.name, sorted(touched)):
            old_rows.setdefault(row.path, []).append(row)
        updates = self._analyze_paths(sorted(touched), entries, policy, summary)
        new_rows = [r for up in updates for r in up.points or ()]
        vectors = self._vectors_for(new_rows, branch, summary)
        retry: set[str] = set()  # paths missing a chunk that failed to embed: journaled, redone next sync
        if summary.chunks_failed:
            failed = {r.chunk_hash for r in new_rows} - set(vectors)
            for up in updates:
                kept = [p for p in up.points or () if p.chunk_hash not in failed]
                if len(kept) != len(up.points or ()):
                    retry.add(up.path)
                up.points = kept
        self._write_store(branch, updates, {} if rewrite else old_rows, vectors, summary)
        self._sparse = {}
        if rewrite:  # points of paths gone since: the old manifest's ids not written now
            kept = {r.point_id for up in updates for r in up.points or ()}
            stale = [r.point_id for rows in old_rows.values() for r in rows if r.point_id not in kept]
            if stale:
                ws.store.delete(branch.collection, stale)
                ws.store.flush(branch.collection)
                summary.points_deleted += len(stale)
        ws.state.commit_paths(branch.name, updates, head, self.pipeline, retry=retry | self._path_failed)

    def _analyze_paths(
        self, paths: list[str], entries: dict[str, Entry], policy: Policy, summary: IndexSummary
    ) -> list[FileUpdate]:
        emb = self.ws.embedder
        updates = []
        for i, path in enumerate(paths):
            self.progress("chunk", i + 1, len(paths))
            entry = entries.get(path)
            if entry is None:
                updates.append(FileUpdate(path, None))
                summary.files_deleted += 1
                continue
            reason, analysis = self._analyze_one(entry, policy, emb.max_tokens, emb.count_tokens)
            if reason:
                summary.files_skipped += 1
                summary.skipped.append({"path": path, "reason": reason})
                updates.append(FileUpdate(path, entry.blob, reason, []))
                continue
            assert analysis is not None
            summary.files_indexed += 1
            self._texts.update((c.hash, c.text) for c in analysis.chunks if c.embeddable)
            self.ws.state.put_symbols(entry.blob, CHUNKER_VERSION, _graph(analysis))
            updates.append(FileUpdate(path, entry.blob, None, _rows_for(entry, analysis)))
        return updates

    def _analyze_one(
        self, entry: Entry, policy: Policy, max_tokens: int, count_tokens: Callable[[str], int]
    ) -> tuple[str | None, FileAnalysis | None]:
        reason = policy.by_path(entry)
        if reason:
            return reason, None
        try:
            reason = policy.by_size(self.ws.repo.blob_size(entry.blob))  # a huge blob is never read
            data = b"" if reason else self.ws.repo.read_blob(entry.blob)
        except Exception as exc:  # a corrupt or missing object: skip the file, keep going
            return f"unreadable blob: {exc}", None
        reason = reason or policy.by_content(data, entry.path)
        if reason:
            return reason, None
        try:
            return None, analyze(entry.path, data, max_tokens=max_tokens, count_tokens=count_tokens)
        except Exception as exc:  # one bad file never stops the rest
            log.warning("chunker failed", path=entry.path, error=repr(exc))
            return f"chunker error: {type(exc).__name__}", None

    def _vectors_for(self, rows: list[PointRow], branch: Branch, summary: IndexSummary) -> dict[str, np.ndarray]:
        """Dense vectors for every row's hash: from the cache, else embedded and cached."""
        state, emb = self.ws.state, self.ws.embedder
        hashes = list(dict.fromkeys(r.chunk_hash for r in rows))
        vectors = state.get_vectors(hashes, branch.fingerprint)
        sparse_have = state.get_sparse(hashes, sparse.VERSION)
        new_sparse = {h: sparse.document_vector(self._texts[h]) for h in hashes if h not in sparse_have}
        if new_sparse:
            state.put_sparse(new_sparse, sparse.VERSION)
        self._sparse = {**sparse_have, **new_sparse}  # for _write_store: not read back from SQLite
        todo = [(h, self._texts[h]) for h in hashes if h not in vectors]
        batch = max(1, self.ws.settings.batch_size)
        pending: dict[str, np.ndarray] = {}  # embedded, not yet cached: one transaction a second
        written = time.monotonic()
        try:
            for i in range(0, len(todo), batch):
                part = todo[i : i + batch]
                got, failed = _embed(emb, [t for _, t in part])
                fresh = {h: got[j] for j, (h, _) in enumerate(part) if j not in failed}
                pending.update(fresh)
                if len(pending) >= CACHE_BATCH or time.monotonic() - written >= 1.0:
                    state.put_vectors(pending, branch.fingerprint)
                    pending, written = {}, time.monotonic()
                vectors.update(fresh)
                summary.chunks_embedded += len(part) - len(failed)
                self._embedded.update(fresh)
                summary.chunks_failed += len(failed)
                for j in failed:
                    summary.skipped.append({"path": self._path_of(part[j][0], rows), "reason": "a chunk failed to embed"})
                self.progress("embed", min(i + batch, len(todo)), len(todo))
        finally:  # also when embedding fails part way: what was embedded stays cached
            if pending:
                state.put_vectors(pending, branch.fingerprint)
        return vectors

    def _path_of(self, chunk_hash: str, rows: list[PointRow]) -> str:
        return next((r.path for r in rows if r.chunk_hash == chunk_hash), "?")

    def _write_store(
        self,
        branch: Branch,
        updates: list[FileUpdate],
        old_rows: dict[str, list[PointRow]],
        vectors: dict[str, np.ndarray],
        summary: IndexSummary,
    ) -> None:
        store, coll = self.ws.store, branch.collection
        upserts: list[PointRow] = []
        deletes: list[str] = []
        payloads: dict[str, dict[str, Any]] = {}
        for up in updates:
            before = {r.point_id: r for r in old_rows.get(up.path, [])}
            after = {r.point_id: r for r in up.points or ()}
            deletes.extend(pid for pid in before if pid not in after)
            for pid, row in after.items():
                if pid not in before:
                    upserts.append(row)
                elif before[pid].payload != row.payload:
                    payloads[pid] = row.payload
        if not (upserts or deletes or payloads):
            return
        self.ws.state.write_journal(branch.name, [u.path for u in updates])
        sparse_vecs = dict(self._sparse)
        sparse_vecs.update(self.ws.state.get_sparse((r.chunk_hash for r in upserts if r.chunk_hash not in sparse_vecs),
                                                    sparse.VERSION))
        paths, summary.paths_embedded = path_vectors(
            self.ws.state, self.ws.embedder, branch.fingerprint, (r.path for r in upserts), self._path_failed
        )
        records = [_record(r, vectors, sparse_vecs, paths) for r in upserts]
        for i in range(0, len(records), UPSERT_BATCH):
            store.upsert(coll, records[i : i + UPSERT_BATCH])
            self.progress("store", min(i + UPSERT_BATCH, len(records)), len(records))
        if deletes:
            store.delete(coll, deletes)
        if payloads:
            store.set_payload(coll, payloads)
        store.flush(coll)
        summary.points_upserted += len(records)
        summary.points_deleted += len(deletes)
        summary.payloads_updated += len(payloads)
        summary.chunks_reused += sum(1 for r in upserts if r.chunk_hash not in self._embedded)


def _record(
    row: PointRow, dense: dict[str, np.ndarray], sparse_vecs: dict[str, Any], paths: dict[str, np.ndarray]
) -> PointRecord:
    """The store point of a manifest row: chunk + path vectors, chunk + path terms."""
    vector = combine(dense[row.chunk_hash], paths[row.path])
    return PointRecord(row.point_id, vector, sparse.with_path(sparse_vecs[row.chunk_hash], row.path), row.payload)


def _is_policy_file(path: str) -> bool:
    return path == IGNORE_FILE or path == ".gitattributes" or path.endswith("/.gitattributes")


def _graph(analysis: FileAnalysis) -> dict[str, Any]:
    return {
        "language": analysis.language,
        "definitions": _flat_dicts(analysis.definitions),
        "references": _flat_dicts(analysis.references),
    }


def _flat_dicts(items: list[Any]) -> list[dict[str, Any]]:
    """``[asdict(x) for x in items]`` for dataclasses of one type with scalar fields only
    (SymbolDef, SymbolRef), without asdict's recursive deep copy (a profile's 4%)."""
    if not items:
        return []
    names = [f.name for f in fields(items[0])]
    return [{name: getattr(item, name) for name in names} for item in items]


def _embed(emb: Any, texts: list[str]) -> tuple[np.ndarray, set[int]]:
    """Embed texts; returns (vectors, indices that failed). Uses partial embedding when offered."""
    partial = getattr(emb, "embed_documents_partial", None)
    if partial is not None:
        vecs, failed = partial(texts)
        return vecs, set(failed)
    return emb.embed_documents(texts), set()
