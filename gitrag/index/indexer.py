"""The sync algorithm: bring one branch's view of the shared collection to its HEAD at a
cost proportional to what changed.

    diff(last indexed commit, HEAD) with renames  (or manifest vs tree when the old commit is gone)
    -> read touched blobs, skip by policy, chunk
    -> vectors from the cache by (chunk SHA-256, embedder fingerprint), embed only the misses
    -> plan the store writes (gitrag.index.views): upsert points new to the collection, delete the
       ones no branch holds any more, update the ``branches`` of shared ones
    -> journal the touched paths; write the store; flush
    -> one SQLite transaction: manifest of the touched paths + the new indexed commit

A crash anywhere leaves the journal; the next sync (of any branch: the collection is
shared) first restores every journaled path in the store from the state and the cache, so
the collection always converges to the manifests. A branch seen for the first time starts
from the file list of its nearest indexed branch (by merge-base distance): its tag is
added to the points they share, then the diff is applied.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
import structlog

from gitrag.errors import BranchGone, EmbedderMismatch
from gitrag.git.repo import DETACHED, LEGACY_DETACHED, Entry
from gitrag.index import pool as index_pool
from gitrag.index import sparse, views
from gitrag.index import state as state_mod
from gitrag.index.chunking import CHUNKER_VERSION, FileAnalysis, analyze
from gitrag.index.chunking.model import TokenSpan
from gitrag.index.embedders.base import embed_partial
from gitrag.index.policy import IGNORE_FILE, Policy
from gitrag.index.policy import VERSION as POLICY_VERSION
from gitrag.index.state import Branch, FileUpdate, PointRow
from gitrag.index.vector_cache import stored_forms
from gitrag.index.vectors import VERSION as VECTORS_VERSION
from gitrag.index.workspace import Workspace
from gitrag.progress import UNKNOWN

log = structlog.get_logger("gitrag.index.indexer")

Progress = Callable[[str, int, int], None]  # (stage, done, total)
UPSERT_BATCH = views.UPSERT_BATCH  # the sync's points per upsert, named here so a test can shrink it
# A sync is written in batches of about this many new points (or of this many paths): what
# it holds in memory (texts, vectors, sparse vectors, points, the plan) is bounded by the
# batch, not by the repository (see Indexer._apply).
BATCH_CHUNKS = 2048
COUNT_PATHS = 2000  # a sync touching more paths counts the branch's points anew (else: the touched paths')
BATCH_FILES = 512
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
    chunks_repeated: int = 0  # points whose text repeats a chunk embedded in this run (embedded once)
    points_upserted: int = 0
    points_deleted: int = 0
    seconds: float = 0.0
    previous_commit: str | None = None
    started_from: str | None = None
    payloads_updated: int = 0
    paths_embedded: int = 0
    chunks_failed: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    commits_indexed: int = 0  # commits new to the history index (gitrag.index.history)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def point_id(variant: str, path: str, blob: str, start_byte: int, end_byte: int, chunk_hash: str) -> str:
    """Stable id of a chunk occurrence, the same in every branch that has it: same pipeline
    and embedder (``variant``), path, blob, byte range and text -> same point."""
    return str(uuid.uuid5(_POINT_NS, f"{variant}\0{path}\0{blob}\0{start_byte}\0{end_byte}\0{chunk_hash}"))


def _rows_for(entry: Entry, analysis: FileAnalysis, variant: str) -> list[PointRow]:
    rows = []
    for chunk in analysis.chunks:
        if not chunk.embeddable:  # content-free: it tiles the file but is never a point
            continue
        h = chunk.hash
        payload = {
            "path": entry.path, "blob": entry.blob, "start_byte": chunk.start_byte, "end_byte": chunk.end_byte,
            "start_line": chunk.start_line, "end_line": chunk.end_line, "symbol": chunk.symbol,
            "kind": chunk.kind, "language": chunk.language, "chunk_hash": h,
        }
        if chunk.prose:
            payload["prose"] = chunk.prose
        for role, share in chunk.roles:  # "decl", "test": gitrag.index.chunking.roles
            payload[role] = share
        pid = point_id(variant, entry.path, entry.blob, chunk.start_byte, chunk.end_byte, h)
        rows.append(PointRow(pid, entry.path, h, payload))
    return rows


class Indexer:
    """Runs syncs for one :class:`Workspace`; ``progress`` gets (stage, done, total) calls."""

    def __init__(self, ws: Workspace, progress: Progress | None = None) -> None:
        self.ws = ws
        self.progress = progress or (lambda stage, done, total: None)
        self._texts: dict[str, str] = {}  # chunk hash -> embedding text, for the current batch
        self._spans: dict[str, TokenSpan] = {}  # chunk hash -> its exact token ids, when known (current batch)
        self._embedded: set[str] = set()  # hashes embedded in this sync
        self._written: set[str] = set()  # of those, the ones a point written in this sync already holds
        self._given: dict[str, np.ndarray] = {}  # chunk hash -> dense vector a pool worker made (current batch)
        self._given_sparse: dict[str, Any] = {}  # chunk hash -> sparse vector a pool worker made (current batch)
        self._feed: _Feed | None = None  # the worker pool's results, for a big sync (gitrag.index.pool)
        self._path_failed: set[str] = set()  # paths whose path text failed to embed: retried next sync

    @property
    def pipeline(self) -> str:
        """PIPELINE_VERSION plus the settings that decide which files are indexed."""
        return f"{PIPELINE_VERSION}/max{self.ws.settings.max_file_bytes}/policy{POLICY_VERSION}"

    @property
    def variant(self) -> str:
        """What decides a file's points besides path and blob (part of every point id)."""
        return state_mod.variant(self.pipeline, self.ws.embedder.fingerprint)

    # -- entry point ------------------------------------------------------------
    def sync(self, rebuild: bool = False, branch: str | None = None, commit: str | None = None,
             history: bool = True) -> IndexSummary:
        """:meth:`_sync`, healed (gitrag.index.heal): a damaged collection is moved aside and
        rebuilt from the vector cache, and ``rebuild`` moves it aside first. ``history``
        False: the code only; the caller runs :meth:`sync_history` itself (the daemon counts
        the sync first, so a client that sees the index at HEAD sees the sync counted)."""
        from gitrag.index import heal

        return heal.syncing(self.ws, lambda: self._sync(rebuild, branch, commit, history), rebuild=rebuild)

    def _sync(self, rebuild: bool = False, branch: str | None = None, commit: str | None = None,
              history: bool = True) -> IndexSummary:
        """:meth:`_sync_code`, then the branch's commit history to the same commit (not for a
        revision view: ``commit`` given; ``gitrag log`` reads the branches' history)."""
        summary = self._sync_code(rebuild, branch, commit)
        if commit is None and history:
            self.sync_history(summary)
        return summary

    def sync_history(self, summary: IndexSummary) -> None:
        """The commit index step (gitrag.index.history): commits new since the branch's history head
        (``summary``: the code sync's, updated with ``commits_indexed`` and its seconds).
        Never raises for the history's own failures (logged)."""
        from gitrag.index import history

        t0 = time.perf_counter()
        done = history.sync_branch(self.ws, summary.branch, summary.commit, code_seconds=summary.seconds)
        summary.commits_indexed = done.commits_read if done is not None else 0
        summary.seconds = round(summary.seconds + time.perf_counter() - t0, 3)

    def _forget_legacy_detached(self) -> None:
        """Once per state: forget the view named ``(detached)``, the detached HEAD's name before
        it became one no branch can have (gitrag.git.repo.DETACHED). A detached HEAD and a
        real branch of that name shared it, so it may hold either's files: the detached view
        and the branch each start again from their nearest indexed branch (nothing embedded)."""
        state = self.ws.state
        if state.meta("detached_view") == DETACHED:
            return
        old = state.branch(LEGACY_DETACHED)
        if old is not None:
            log.info("forgetting the view of the old detached-HEAD name", branch=LEGACY_DETACHED)
            forget_branch(self.ws, old)
        state.set_meta("detached_view", DETACHED)

    def _sync_code(self, rebuild: bool = False, branch: str | None = None,
                   commit: str | None = None) -> IndexSummary:
        """Bring the current branch's index to HEAD, or with ``branch`` that local branch's
        index to the commit at its tip, whether or not it is checked out (a sync reads the
        commit's tree from the object database, never the work tree). Raises
        EmptyRepository on an unborn branch, BranchGone when ``branch`` has no ref,
        EmbedderMismatch when the branch was indexed with another embedder (unless
        ``rebuild``), EmbedderUnavailable / StoreError when those fail (nothing advances).
        ``branch`` and ``commit`` together: the view ``branch`` (a revision view, see
        gitrag.query.revisions) to that commit, which no ref needs to name."""
        t0 = time.perf_counter()
        repo = self.ws.repo
        if branch is not None and commit is not None:
            head, name = commit, branch
        elif branch is None:
            head, name = repo.require_head(), repo.branch()
        else:
            tip = repo.branch_tip(branch)
            if tip is None:
                raise BranchGone(f"branch {branch!r} does not exist (any more); nothing to index")
            head, name = tip, branch
        summary = IndexSummary(str(repo.root), name, head)
        journal = views.repair(self.ws)  # the store is shared: any branch's crash is repaired first
        self._forget_legacy_detached()
        repaired = set(journal.get(name, ()))
        branch = self._prepare_branch(name, head, rebuild, summary)
        summary.previous_commit = branch.indexed_commit
        self.ws.state.touch_branch(name)
        repaired |= set(self.ws.state.journal_paths(name))
        state = self.ws.state
        if branch.indexed_commit == head and not repaired and branch.chunker == self.pipeline:
            summary.chunks_total = state.counted_points(branch)
            if summary.chunks_total is None:  # counted once, then kept (nothing is under way: no journal)
                summary.chunks_total = state.point_count(name)
                state.set_counted_points(name, head, summary.chunks_total)
            summary.seconds = round(time.perf_counter() - t0, 3)
            return summary
        touched = self._touched(branch, head) | repaired
        counted = state.counted_points(branch) if len(touched) <= COUNT_PATHS else None
        if counted is not None:  # the total moves by the touched paths' difference
            counted -= state.point_count_of(name, touched)
        state.set_counted_points(name, None, None)  # unknown until the sync commits (a crash leaves it unknown)
        self._apply(branch, head, touched, summary, repaired)
        if summary.points_upserted or summary.points_deleted or summary.payloads_updated:
            views.settle(self.ws, branch.collection)  # once per sync, after its last batch: when enough changed
        summary.chunks_total = (state.point_count(name) if counted is None
                                else counted + state.point_count_of(name, touched))
        state.set_counted_points(name, head, summary.chunks_total)
        summary.seconds = round(time.perf_counter() - t0, 3)
        log.info("synced", **{k: v for k, v in summary.to_json().items() if k != "skipped"})
        return summary

    # -- branch set-up ------------------------------------------------------------
    def _prepare_branch(self, name: str, head: str, rebuild: bool, summary: IndexSummary) -> Branch:
        """The branch's state and view, ready for a diff: registered (from its nearest indexed
        branch), its collection present and its points in it (``materialized``)."""
        ws, state, fp = self.ws, self.ws.state, self.ws.embedder.fingerprint
        branch = state.branch(name)
        if branch is not None and (rebuild or branch.fingerprint != fp):
            if not rebuild:
                raise EmbedderMismatch(
                    f"branch {name!r} was indexed with embedder {branch.fingerprint}, but {fp} is configured; "
                    f"run `gitrag index --rebuild` to re-embed, or switch the embedder back"
                )
            forget_branch(ws, branch)
            branch = None
        collection = ws.collection()
        if ws.store.has_collection(collection) and ws.store.outdated(collection):
            log.info("converting the collection to the current store layout", collection=collection)
            ws.store.drop_collection(collection)  # an older layout: rebuilt below from the cache, nothing embedded
        if not ws.store.has_collection(collection):  # first index, or dropped: rebuilt from the cache
            views.rebuild(ws, fp, collection, ws.embedder.dim, name)
        if branch is None:
            base = self._nearest_indexed(head, fp)
            # it holds what its base holds: only points where the base differs from its root change
            root, paths, only = (None, [], None) if base is None else self._choose_root(base, head)
            change = state_mod.change_create_branch(name, collection, fp, base.name if base else None, root, only)
            views.transition(ws, name, fp, collection, paths, change)
            branch = state.branch(name)
            assert branch is not None
            if base is not None and only is None:  # base's files: its count
                state.set_counted_points(name, branch.indexed_commit, state.counted_points(base))
            summary.started_from = base.name if base else None
        if not branch.materialized:  # its points left the store (idle): back from the cache
            views.transition(ws, name, fp, collection, _own_paths(ws, branch),
                             state_mod.change_materialized(name, True))
            branch = state.branch(name)
            assert branch is not None
        return branch

    def _choose_root(self, base: Branch, head: str
                     ) -> tuple[str | None, list[str] | None, frozenset[tuple[str, str]] | None]:
        """(root, paths whose membership changes, the (path, blob) of ``base``'s files it
        takes (None: all)) of a new branch at ``head`` that starts from ``base``'s files.

        Its membership is written where it differs from its root (gitrag.index.views), so
        the root is the one it differs from least: of the materialized roots of ``base``'s
        pipeline, the one whose indexed commit's tree differs from ``head``'s in the fewest
        paths (a tree diff: no blob is read; ``base``'s own root wins a tie), or the new
        branch itself (None: a root) when fewer of ``head``'s files are in ``base`` than
        that (each then names it). A branch far from every root (an old release) becomes a
        root, taking only the files of ``base`` that ``head`` has (its sync does the rest),
        and a branch started near it later is rooted at it: it writes its own difference,
        not its whole distance from the first root."""
        ws, repo = self.ws, self.ws.repo
        default = base.root if base.root is not None else base.name
        roots = {b.name: b.indexed_commit for b in ws.state.branches() if b.root is None and b.materialized
                 and b.fingerprint == base.fingerprint and b.chunker == base.chunker
                 and b.indexed_commit and repo.has_commit(b.indexed_commit)}
        if default not in roots or base.indexed_commit is None:  # its root is out of the store, or another pipeline
            return state_mod.BASE_ROOT, _own_paths(ws, base, base_of_new=True), None
        cost = {name: repo.paths_differing(commit, head) for name, commit in roots.items() if commit}
        best = min(cost, key=lambda n: (cost[n], n != default, n))
        near = ws.state.file_count(base.name) - repo.paths_differing(base.indexed_commit, head)  # >= shared files
        if near < 2 * cost[best] and not ws.state.journal_paths(base.name):  # base's manifest is its commit's tree
            tree = {(e.path, e.blob) for e in repo.files(head)}
            files = ws.state.files(base.name)
            shared = [p for p, f in files.items() if (p, f.blob) in tree]
            if len(shared) < cost[best]:
                log.info("a new branch far from every root becomes a root", base=base.name, shared_files=len(shared),
                         nearest_root=best, differing_files=cost[best])
                return None, [p for p in shared if files[p].skip_reason is None], frozenset(tree)
        if best == default:
            return state_mod.BASE_ROOT, _own_paths(ws, base, base_of_new=True), None
        log.info("a new branch rooted at its nearest root", base=base.name, root=best, differing_files=cost[best],
                 base_root_differing_files=cost[default])
        return best, ws.state.differing_paths(base.name, best), None

    def _nearest_indexed(self, head: str, fingerprint: str) -> Branch | None:
        repo, best, best_dist = self.ws.repo, None, None
        for cand in self.ws.state.branches():
            if cand.fingerprint != fingerprint or not repo.has_commit(cand.indexed_commit):
                continue
            if repo.merge_base(cand.indexed_commit, head) is None:
                continue
            dist = repo.distance(cand.indexed_commit, head)
            if best_dist is None or dist < best_dist:
                best, best_dist = cand, dist
        return best

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
    def _apply(self, branch: Branch, head: str, touched: set[str], summary: IndexSummary, repaired: set[str]) -> None:
        """Index ``touched`` paths (every path when the pipeline changed: new point ids), in
        batches of about BATCH_CHUNKS new chunks (or BATCH_FILES paths), so a sync holds one
        batch's texts, vectors and points at a time, whatever the size of the repository.

        Each batch runs the same stages: chunk (``_analyze_batch``) -> vectors from the cache
        or embedded (``_vectors_for``) -> plan, journal, store writes, flush
        (``views.transition``) -> manifest rows of its paths (``State.commit_batch``, which
        journals them in the same transaction). They stay journaled until the last batch's
        ``State.commit_paths`` advances the branch to ``head``: a crash between two batches
        leaves the branch at its old commit, the done paths journaled and the others as they
        were, so the next sync (whatever HEAD is then) redoes the journaled ones and the diff.

        A branch whose points were made by another pipeline is done in one batch: switching
        its ``chunker`` switches all its points at once."""
        ws = self.ws
        entries = {e.path: e for e in ws.repo.files(head)}
        policy = Policy(ws.repo, head, ws.settings.max_file_bytes, list(entries.values()))
        paths = sorted(touched)
        streamed = branch.chunker in (None, self.pipeline)
        retry: set[str] = set()  # paths missing a chunk that failed to embed: journaled, redone next sync
        done = 0
        outer = self.progress
        before: dict[str, int] = {}  # per-batch stage -> its done count in the batches before this one
        this: dict[str, int] = {}

        def whole_sync(stage: str, n: int, total: int) -> None:
            """Per-batch counts (embed, store) reported for the whole sync, not the batch alone:
            done over the batches so far; total = the batches so far, which is the whole
            sync's count once its last batch is chunked, and progress.UNKNOWN before (a
            projection from the batches so far grew as bigger files came, and its percentage
            fell: 44% then 39%)."""
            if stage == "chunk":
                outer(stage, n, total)
                return
            this[stage] = total
            last = done >= len(paths)  # ``done``: the paths chunked so far, this batch's included
            outer(stage, before.get(stage, 0) + n, before.get(stage, 0) + total if last else UNKNOWN)

        self.progress = whole_sync
        if streamed and index_pool.usable(ws.embedder, len(paths)):
            try:
                self._feed = _Feed(self, paths, entries, policy)
            except Exception as exc:  # noqa: BLE001 - no pool: the same work in this process
                log.warning("no worker pool", error=repr(exc))
        try:
            while True:
                limit = (BATCH_CHUNKS, BATCH_FILES) if streamed else (None, None)
                updates, done = self._analyze_batch(paths, done, entries, policy, summary, *limit)
                self._write_batch(branch, head, updates, summary, repaired, retry, final=done >= len(paths))
                for stage, total in this.items():
                    before[stage] = before.get(stage, 0) + total
                this.clear()
                if done >= len(paths):
                    return
        finally:
            self.progress = outer
            if self._feed is not None:
                self._feed.close()
                self._feed = None

    def _write_batch(
        self, branch: Branch, head: str, updates: list[FileUpdate], summary: IndexSummary, repaired: set[str],
        retry: set[str], final: bool,
    ) -> None:
        """Vectors, store writes and manifest rows of one batch (see :meth:`_apply`);
        ``final``: the sync's last batch, whose commit advances the branch to ``head``."""
        ws = self.ws
        new_rows = [r for up in updates for r in up.points or ()]
        failed_before = summary.chunks_failed
        vectors, sparse_vecs = self._vectors_for(new_rows, branch, summary)
        self._texts = {}  # embedded or cached now: this batch's texts are not needed again
        if summary.chunks_failed > failed_before:
            failed = {r.chunk_hash for r in new_rows} - set(vectors)
            for up in updates:
                kept = [p for p in up.points or () if p.chunk_hash not in failed]
                if len(kept) != len(up.points or ()):
                    retry.add(up.path)
                up.points = kept
        planned = state_mod.change_paths(branch.name, updates, head, self.pipeline, final=final)

        def commit(writes: views.Writes) -> None:
            self._path_failed |= writes.path_failed
            retry.update(writes.missing)
            if final:
                ws.state.commit_paths(branch.name, updates, head, self.pipeline, retry=retry | self._path_failed)
            else:
                ws.state.commit_batch(branch.name, updates, self.pipeline)

        batch_paths = [up.path for up in updates]
        writes = views.transition(ws, branch.name, branch.fingerprint, branch.collection, batch_paths, planned,
                                  commit=commit, force=repaired.intersection(batch_paths), vectors=vectors,
                                  progress=self.progress, batch=UPSERT_BATCH, sparse_vectors=sparse_vecs,
                                  optimize=False)
        summary.points_upserted += writes.upserted
        summary.points_deleted += writes.deleted
        summary.payloads_updated += writes.payloads
        summary.paths_embedded += writes.paths_embedded
        for h in writes.hashes:  # each point written: its vector embedded now (once a text), or from the cache
            if h not in self._embedded:
                summary.chunks_reused += 1
            elif h in self._written:
                summary.chunks_repeated += 1
            else:
                self._written.add(h)

    def _analyze_batch(
        self, paths: list[str], start: int, entries: dict[str, Entry], policy: Policy, summary: IndexSummary,
        max_chunks: int | None, max_files: int | None,
    ) -> tuple[list[FileUpdate], int]:
        """Chunk ``paths[start:]`` until ``max_chunks`` new points or ``max_files`` paths
        (None: no limit); returns (the batch's updates, the index of the next path)."""
        emb = self.ws.embedder
        updates: list[FileUpdate] = []
        graphs: list[tuple[str, str, dict[str, Any]]] = []
        chunks, i = 0, start
        while i < len(paths) and (max_files is None or len(updates) < max_files) and (
                max_chunks is None or chunks < max_chunks):
            path = paths[i]
            i += 1
            self.progress("chunk", i, len(paths))
            entry = entries.get(path)
            if entry is None:
                updates.append(FileUpdate(path, None))
                summary.files_deleted += 1
                continue
            got = self._feed.take(path) if self._feed is not None else None
            if isinstance(got, str):  # skipped by path or size, judged in this process
                reason, analysis = got, None
            elif got is not None:  # done by a pool worker
                reason, analysis = got.reason, None
            else:
                reason, analysis = self._analyze_one(entry, policy, emb.max_tokens, emb.count_tokens)
            if reason:
                summary.files_skipped += 1
                summary.skipped.append({"path": path, "reason": reason})
                updates.append(FileUpdate(path, entry.blob, reason, []))
                continue
            summary.files_indexed += 1
            if analysis is not None:
                for c in analysis.chunks:
                    if c.embeddable:
                        h = c.hash
                        self._texts[h] = c.text
                        if c.span is not None:
                            self._spans[h] = c.span
                graphs.append((entry.blob, CHUNKER_VERSION, _graph(analysis)))
                rows = _rows_for(entry, analysis, self.variant)
            else:
                assert isinstance(got, index_pool.FileResult)
                self._texts.update(got.texts)
                self._given.update(got.vectors)
                self._given_sparse.update(got.sparse)
                graphs.append((entry.blob, CHUNKER_VERSION, got.graph))
                rows = got.rows
            chunks += len(rows)
            updates.append(FileUpdate(path, entry.blob, None, rows))
        self.ws.state.put_symbols_many(graphs)  # the batch's graphs in one transaction
        return updates, i

    def _analyze_one(
        self, entry: Entry, policy: Policy, max_tokens: int, count_tokens: Callable[[str], int]
    ) -> tuple[str | None, FileAnalysis | None]:
        reason = policy.by_path(entry)
        if reason:
            return reason, None
        try:
            reason = policy.by_size(self.ws.repo.blob_size(entry.blob))  # a huge blob is never read
            data = b"" if reason else self.ws.repo.read_blob(entry.blob)
        except Exception as exc:  # noqa: BLE001 - a corrupt or missing object: skip the file, keep going
            return f"unreadable blob: {exc}", None
        reason = reason or policy.by_content(data, entry.path)
        if reason:
            return reason, None
        try:
            return None, analyze(entry.path, data, max_tokens=max_tokens, count_tokens=count_tokens)
        except Exception as exc:  # noqa: BLE001 - one bad file never stops the rest
            log.warning("chunker failed", path=entry.path, error=repr(exc))
            return f"chunker error: {type(exc).__name__}", None

    def _vectors_for(
        self, rows: list[PointRow], branch: Branch, summary: IndexSummary
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """(dense, sparse vectors) by chunk hash for every row's hash: from the cache, else
        embedded (computed) and cached. A chunk that failed to embed has no dense vector."""
        state, emb = self.ws.state, self.ws.embedder
        hashes = list(dict.fromkeys(r.chunk_hash for r in rows))
        vectors = state.get_vectors(hashes, branch.fingerprint)
        sparse_have = state.get_sparse(hashes, sparse.VERSION)
        given_sparse, self._given_sparse = self._given_sparse, {}
        new_sparse = {h: given_sparse.get(h) or sparse.document_vector(self._texts[h])
                      for h in hashes if h not in sparse_have}
        if new_sparse:
            state.put_sparse(new_sparse, sparse.VERSION)
        given, self._given = self._given, {}
        made = {h: given[h] for h in hashes if h not in vectors and h in given}  # by a pool worker
        if made:
            state.put_vectors(made, branch.fingerprint)
            vectors.update(made)
            summary.chunks_embedded += len(made)
            self._embedded.update(made)
        todo = [(h, self._texts[h]) for h in hashes if h not in vectors]
        whole = len(made) + len(todo)  # one total for the batch's embed stage: the pool's and ours
        if made:
            self.progress("embed", len(made), whole)
        batch = max(1, self.ws.settings.batch_size)
        pending: dict[str, np.ndarray] = {}  # embedded, not yet cached: one transaction a second
        written = time.monotonic()
        try:
            for i in range(0, len(todo), batch):
                part = todo[i : i + batch]
                got, failed = _embed(emb, [t for _, t in part], [self._spans.pop(h, None) for h, _ in part])
                # as the cache keeps them (int8 and a scale): the same point whether embedded now or read back
                forms = stored_forms(got)
                fresh = {h: forms[j] for j, (h, _) in enumerate(part) if j not in failed}
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
                self.progress("embed", len(made) + min(i + batch, len(todo)), whole)
        finally:  # also when embedding fails part way: what was embedded stays cached
            self._spans.clear()  # they hold the files' token ids
            if pending:
                state.put_vectors(pending, branch.fingerprint)
        sparse_have.update(new_sparse)
        return vectors, sparse_have

    def _path_of(self, chunk_hash: str, rows: list[PointRow]) -> str:
        return next((r.path for r in rows if r.chunk_hash == chunk_hash), "?")


class _Feed:
    """The pool's results for a sync's paths, taken in path order (:meth:`take`). The
    policy's path and size rules run here, as the pool is fed; a worker reads the rest."""

    def __init__(self, indexer: Indexer, paths: list[str], entries: dict[str, Entry], policy: Policy) -> None:
        ws = indexer.ws
        self.pool = index_pool.Pool(str(ws.repo.root), ws.settings, str(ws.state.cache.path), indexer.variant,
                                    ws.embedder.fingerprint)
        self.repo, self.policy = ws.repo, policy
        self.known: dict[str, str] = {}  # path -> skip reason judged here
        self.results = self.pool.results(self._works(paths, entries))
        self.peeked: tuple[index_pool.FileWork, Any] | None = None
        self.broken = False

    def _works(self, paths: list[str], entries: dict[str, Entry]) -> Any:
        for path in paths:
            entry = entries.get(path)
            if entry is None:
                continue
            reason = self.policy.by_path(entry)
            if not reason:
                try:
                    reason = self.policy.by_size(self.repo.blob_size(entry.blob))
                except Exception as exc:  # noqa: BLE001 - a corrupt or missing object: skip the file, keep going
                    reason = f"unreadable blob: {exc}"
            if reason:
                self.known[path] = reason
                continue
            yield index_pool.FileWork(path, entry.blob, entry.mode, self.policy.reincluded(path))

    def take(self, path: str) -> index_pool.FileResult | str | None:
        """The result for ``path`` (the next path of the sync that exists at HEAD): a skip
        reason judged here, a worker's FileResult, or None: do it in this process (the pool
        broke, or this file's task failed)."""
        while not self.broken:
            if path in self.known:
                return self.known.pop(path)
            if self.peeked is None:
                self.peeked = next(self.results, None)
                if self.peeked is None:
                    return None
            work, future = self.peeked
            if work.path != path:  # the works are past ``path``: it was judged here, or is unknown
                return self.known.pop(path, None)
            self.peeked = None
            try:
                return future.result()
            except Exception as exc:  # noqa: BLE001 - a broken pool or a failed task: in-process
                log.warning("worker pool failed; indexing in this process", path=path, error=repr(exc))
                self.broken = "Broken" in type(exc).__name__
                return None
        return None

    def close(self) -> None:
        self.pool.close()


def _own_paths(ws: Workspace, branch: Branch, base_of_new: bool = False) -> list[str] | None:
    """The paths whose points change membership when ``branch`` comes or goes: where it
    differs from its root, or a root's own indexed paths (None: every path: a root others
    are rooted at, a root out of the store, another pipeline). ``base_of_new``: for a new
    branch started from ``branch`` (rooted at its root)."""
    if branch.root is None and not base_of_new:  # a root: its own points, unless branches are rooted at it
        if any(b.root == branch.name for b in ws.state.branches()):
            return None
        return ws.state.indexed_paths(branch.name)
    root_name = branch.root if branch.root is not None else (branch.name if base_of_new else None)
    root = ws.state.branch(root_name) if root_name is not None else None
    if root is None or not root.materialized:
        return None
    if root_name == branch.name:  # a new branch of a root: it shares every point of it
        return []
    return ws.state.differing_paths(branch.name, root_name)


def forget_branch(ws: Workspace, branch: Branch) -> None:
    """Remove a branch: its manifest, and its membership of the points of its collection
    (points no other branch holds are deleted; branches rooted at it become roots). The
    collection goes when no branch is left in it."""
    dependents = any(b.root == branch.name for b in ws.state.branches())
    paths = None if dependents else _own_paths(ws, branch)
    if ws.store.has_collection(branch.collection):
        views.transition(ws, branch.name, branch.fingerprint, branch.collection, paths,
                         state_mod.change_drop_branch(branch.name))
    else:
        ws.state.drop_branch(branch.name)
    if not any(b.collection == branch.collection for b in ws.state.branches()):
        ws.store.drop_collection(branch.collection)
        ws.state.clear_unoptimized(branch.collection)


def release_branch(ws: Workspace, branch: Branch) -> None:
    """Take an idle branch's points out of the store (only it held them: deleted; shared:
    its tag removed). Its manifest stays: the next sync puts them back with no embedding."""
    if not ws.store.has_collection(branch.collection):
        ws.state.set_materialized(branch.name, False)
        return
    views.transition(ws, branch.name, branch.fingerprint, branch.collection, _own_paths(ws, branch),
                     state_mod.change_materialized(branch.name, False))


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


def _embed(emb: Any, texts: list[str], spans: list[TokenSpan | None]) -> tuple[np.ndarray, set[int]]:
    """Embed texts (from their token ids where the chunker knows them, see embed_partial);
    returns (vectors, indices that failed)."""
    vecs, failed = embed_partial(emb, texts, spans)
    return vecs, set(failed)
