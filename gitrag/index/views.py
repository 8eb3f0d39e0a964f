"""Branch views over one shared collection: the store writes that follow a state change.

All branches of a repository indexed with one embedder share one collection. A point is a
chunk occurrence (pipeline, path, blob, byte range, chunk hash), held by the materialized
branches whose manifest has it. Membership is written relative to each branch's *root*
(the branch it started from), so a new branch costs only its difference (:class:`Encoder`):

    branches = the holders whose root is not a holder (roots name themselves)
    hidden   = the branches whose root holds the point but which do not

and a branch sees ``branches ∋ tag or (branches ∋ root and hidden ∌ tag)``
(:class:`gitrag.index.store.BranchView`). A change of the state (a sync's manifest update, a
new branch, a dropped or idle branch) is applied in four steps:

    plan: the points of the touched paths, their holders and the branches, now and after
          the change (State.plan, a rolled-back trial) -> upserts (points new to the
          store), deletes (points no branch holds any more), payload updates (membership)
    journal the touched paths (committed)  ->  write the store, flush  ->  commit the change

A crash between the journal and the commit leaves the journal; :func:`repair` (run first
by every sync) deletes the journaled paths' points and upserts them again from the state
and the vector cache, so the collection always converges to the state.

The store's optimizer (vacuum dead copies, merge and seal segments) is not run after every
change: the journal's transaction also counts the writes (``State.unoptimized``), and
:func:`settle` runs it once they reach OPTIMIZE_EVERY points or OPTIMIZE_SHARE of the
collection (a first index, a rebuild); ``gitrag gc`` and the daemon's gc pass run it for
whatever is left (:func:`settle_all`). Until then the few changed points sit in the
store's small appendable segment, answered like the rest.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import structlog

from gitrag.index import sparse
from gitrag.index.integrity import SIGNATURE, signatures, with_digest
from gitrag.index.state import Member, PointRow, Snapshot, StoreWrites, branch_tag
from gitrag.index.store import BRANCHES, HIDDEN, PointRecord
from gitrag.index.vectors import combine, path_vectors
from gitrag.index.workspace import Workspace

log = structlog.get_logger("gitrag.index.views")

UPSERT_BATCH = 256  # points per upsert call: its vectors, sparse vectors and payloads in memory at once
REBUILD_SLICE = 8192  # points whose vectors are read from the cache at a time (_upsert)
REBUILD_PATHS = 256  # paths whose manifest rows a rebuild reads at a time (rebuild)
Change = Callable[[sqlite3.Connection], None]
# The optimizer runs once this many points were upserted, deleted or moved in a collection
# since it last ran, or this share of the collection's points (see the module doc).
OPTIMIZE_EVERY = 16_384
OPTIMIZE_SHARE = 0.2


Membership = tuple[tuple[str, ...], tuple[str, ...]]  # (branches tags, hidden tags)


class Encoder:
    """The membership payloads (``branches``, ``hidden``) of points held by given branches, in
    one snapshot of the branches (see the module doc); memoised per set of holders."""

    def __init__(self, snap: Snapshot) -> None:
        self.branches = snap.branches
        self.dependents: dict[str, list[str]] = {}
        for b, br in snap.branches.items():
            if br.materialized and br.root is not None:
                self.dependents.setdefault(br.root, []).append(b)
        self._memo: dict[frozenset[str], Membership] = {}

    def __call__(self, holders: frozenset[str]) -> Membership:
        got = self._memo.get(holders)
        if got is None:
            explicit = [b for b in holders if self.branches[b].root is None or self.branches[b].root not in holders]
            hidden = [d for r in holders for d in self.dependents.get(r, ()) if d not in holders]
            got = (tuple(sorted(branch_tag(b) for b in explicit)), tuple(sorted(branch_tag(b) for b in hidden)))
            self._memo[holders] = got
        return got


def expected(ws: Workspace, fingerprint: str) -> dict[str, Membership]:
    """{point id: (branches, hidden)} the collection of ``fingerprint`` must hold now."""
    snap = ws.state.snapshot(fingerprint)
    enc = Encoder(snap)
    return {pid: enc(m.branches) for pid, m in snap.members.items()}


@dataclass
class Writes:
    """What one change wrote to the store."""

    upserted: int = 0
    deleted: int = 0
    payloads: int = 0  # points whose membership changed (set_payload)
    missing: set[str] = field(default_factory=set)  # paths whose vectors are not in the cache
    path_failed: set[str] = field(default_factory=set)  # paths whose path text failed to embed
    paths_embedded: int = 0  # path texts embedded now
    hashes: list[str] = field(default_factory=list)  # chunk hashes of the points upserted


def transition(
    ws: Workspace,
    journal_branch: str,
    fingerprint: str,
    collection: str,
    paths: Iterable[str] | None,
    change: Change,
    commit: Callable[[Writes], None] | None = None,
    force: Iterable[str] = (),
    vectors: dict[str, np.ndarray] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    batch: int = UPSERT_BATCH,
    sparse_vectors: dict[str, Any] | None = None,
    optimize: bool = True,
) -> Writes:
    """Apply ``change`` to the state and the collection together (see the module doc).

    ``paths``: every path whose points the change may touch (None: all paths). ``commit``
    commits the change once the store is written, given what was written, and must clear
    ``journal_branch``'s journal (default: ``change`` in one transaction that clears the
    journal rows written here). ``force``: paths whose points are upserted even if the
    state says the store has them (after a repair). ``vectors``, ``sparse_vectors``: chunk
    vectors and sparse vectors at hand, by chunk hash (else read from the cache).
    ``batch``: points per upsert call. ``optimize``: :func:`settle` the collection after
    the flush (a sync's batches pass False: the sync settles once, after its last)."""
    state = ws.state
    snap_before, snap_after = state.plan(fingerprint, paths, change)
    before, after = snap_before.members, snap_after.members
    enc_before, enc_after = Encoder(snap_before), Encoder(snap_after)
    forced = set(force)
    deletes = [pid for pid in before if pid not in after]
    upserts = [(m, enc_after(m.branches)) for pid, m in after.items() if pid not in before or m.row.path in forced]
    moved: dict[Membership, list[str]] = {}
    for pid, m in after.items():
        if pid in before and m.row.path not in forced:
            now = enc_after(m.branches)
            if enc_before(before[pid].branches) != now:
                moved.setdefault(now, []).append(pid)
    writes = Writes()
    touched = {m.row.path for m in before.values()} | {m.row.path for m in after.values()} | forced
    if paths is not None:
        touched |= set(paths)
    if deletes or upserts or moved:
        counted = StoreWrites(len(upserts), len(deletes), sum(len(ids) for ids in moved.values()))
        state.write_journal(journal_branch, sorted(touched), (collection, counted))
        writes.missing, writes.paths_embedded = _upsert(ws, fingerprint, collection, upserts, vectors,
                                                        writes.path_failed, progress, batch, sparse_vectors)
        writes.hashes = [m.row.chunk_hash for m, _ in upserts if m.row.path not in writes.missing]
        writes.upserted = len(writes.hashes)
        if deletes:
            ws.store.delete(collection, deletes)
        for (tags, hidden), ids in moved.items():
            ws.store.set_payload_of(collection, ids, {BRANCHES: list(tags), HIDDEN: list(hidden)})
        ws.store.flush(collection)
        if optimize:
            settle(ws, collection)
        writes.deleted, writes.payloads = len(deletes), sum(len(ids) for ids in moved.values())
    if commit is not None:
        commit(writes)
        return writes
    done = sorted(touched - writes.missing)

    def apply(db: sqlite3.Connection) -> None:
        db.executemany("DELETE FROM journal WHERE branch=? AND path=?", [(journal_branch, p) for p in done])
        change(db)

    state.apply(apply)
    return writes


def settle(ws: Workspace, collection: str, force: bool = False) -> bool:
    """Run the store's optimizer on ``collection`` if the points written since it last ran
    (``State.unoptimized``) reach OPTIMIZE_EVERY or OPTIMIZE_SHARE of the collection's points
    (``force``: if any were); returns whether it ran. A one-file change of a 200k-point
    collection leaves it for later: the optimizer's pass over the segments costs what the
    collection costs, not what changed. Raises StoreError as the store's optimize does."""
    pending = ws.state.unoptimized(collection).total
    if pending == 0 or not ws.store.has_collection(collection):
        return False
    if not force and pending < OPTIMIZE_EVERY and pending < OPTIMIZE_SHARE * ws.store.count(collection):
        return False
    optimize(ws, collection)
    return True


def settle_all(ws: Workspace) -> list[str]:
    """:func:`settle` (forced) every collection of the repository with writes the optimizer
    has not seen: ``gitrag gc`` and the daemon's gc pass. Returns the collections optimized."""
    names = sorted({b.collection for b in ws.state.branches()})
    return [name for name in names if settle(ws, name, force=True)]


def optimize(ws: Workspace, collection: str) -> None:
    """Run the store's optimizer on ``collection`` now and zero its count of writes."""
    ws.store.optimize(collection)
    ws.state.clear_unoptimized(collection)


def upsert_members(
    ws: Workspace,
    fingerprint: str,
    collection: str,
    members: list[tuple[Member, Membership]],
    vectors: dict[str, np.ndarray] | None = None,
    path_failed: set[str] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> set[str]:
    """Upsert these points from the vector cache; returns the paths whose vectors are missing
    (none of their points is written: the caller journals them for a re-index)."""
    return _upsert(ws, fingerprint, collection, members, vectors, path_failed, progress, UPSERT_BATCH)[0]


def _upsert(
    ws: Workspace,
    fingerprint: str,
    collection: str,
    members: list[tuple[Member, Membership]],
    vectors: dict[str, np.ndarray] | None,
    path_failed: set[str] | None,
    progress: Callable[[str, int, int], None] | None,
    batch: int,
    sparse_given: dict[str, Any] | None = None,
) -> tuple[set[str], int]:
    """(paths whose vectors are missing, path texts embedded now); see :func:`upsert_members`.
    Members are written REBUILD_SLICE at a time, each slice's vectors read from the cache
    then: a rebuild of the whole collection (a layout conversion, a heal) holds one slice's
    vectors, not every point's."""
    missing: set[str] = set()
    embedded = 0
    for start in range(0, len(members), REBUILD_SLICE):
        part_missing, part_embedded = _upsert_slice(ws, fingerprint, collection, members[start : start + REBUILD_SLICE],
                                                    vectors, path_failed, progress, batch, sparse_given)
        missing |= part_missing
        embedded += part_embedded
        if start + REBUILD_SLICE < len(members):
            ws.store.flush(collection)  # where the layout seals segments as they grow (store.edge.LAYOUT)
    return missing, embedded


def _upsert_slice(
    ws: Workspace,
    fingerprint: str,
    collection: str,
    members: list[tuple[Member, Membership]],
    vectors: dict[str, np.ndarray] | None,
    path_failed: set[str] | None,
    progress: Callable[[str, int, int], None] | None,
    batch: int,
    sparse_given: dict[str, Any] | None = None,
) -> tuple[set[str], int]:
    if not members:
        return set(), 0
    hashes = [m.row.chunk_hash for m, _ in members]
    given = vectors or {}
    dense = {h: given[h] for h in hashes if h in given}
    need = [h for h in hashes if h not in dense]
    if need:
        dense.update(ws.state.get_vectors(need, fingerprint))
    given_sparse = sparse_given or {}
    sparse_vecs = {h: given_sparse[h] for h in hashes if h in given_sparse}
    need = [h for h in hashes if h not in sparse_vecs]
    if need:
        sparse_vecs.update(ws.state.get_sparse(need, sparse.VERSION))
    missing = {m.row.path for m, _ in members if m.row.chunk_hash not in dense or m.row.chunk_hash not in sparse_vecs}
    kept = [(m, enc) for m, enc in members if m.row.path not in missing]
    paths, embedded = path_vectors(ws.state, ws.embedder, fingerprint, (m.row.path for m, _ in kept), path_failed)
    batch = max(1, batch)
    kept_sigs: dict[str, tuple[str, list[float]]] = {}
    for i in range(0, len(kept), batch):
        part = kept[i : i + batch]
        vecs = [(combine(dense[m.row.chunk_hash], paths[m.row.path]),
                 sparse.with_path(sparse_vecs[m.row.chunk_hash], m.row.path)) for m, _ in part]
        sigs = signatures([v for v, _ in vecs], [t for _, t in vecs])  # one product for the batch
        points = [record(m.row, dense, sparse_vecs, paths, enc, made, ws.store.payload_fields) for (m, enc), made in
                  zip(part, zip(vecs, sigs, strict=True), strict=True)]
        ws.store.upsert(collection, points)
        kept_sigs.update((p.id, (m.row.chunk_hash, p.payload[SIGNATURE])) for p, (m, _) in zip(points, part, strict=True))
        if progress is not None:
            progress("store", min(i + batch, len(kept)), len(kept))
    # each point's vector signature, by point id, for the per-query check (gitrag.index.integrity); one transaction
    ws.state.cache.put_signatures(kept_sigs)
    return missing, embedded


def record(
    row: PointRow, dense: dict[str, np.ndarray], sparse_vecs: dict[str, Any], paths: dict[str, np.ndarray],
    membership: Membership, made: tuple[tuple[np.ndarray, Any], list[float]] | None = None,
    keep: tuple[str, ...] | None = None,
) -> PointRecord:
    """The store point of a manifest row: chunk + path vectors, chunk + path terms, membership,
    and the signature of its vectors and the payload's digest (gitrag.index.integrity).
    ``made``: ((vector, terms), signature) when computed already for a batch; ``keep``: the
    payload fields the point keeps (the store's ``payload_fields``; None: all), the digest
    taken over those."""
    if made is None:
        vector = combine(dense[row.chunk_hash], paths[row.path])
        terms = sparse.with_path(sparse_vecs[row.chunk_hash], row.path)
        sig = None
    else:
        (vector, terms), sig = made
    payload = row.payload if keep is None else {k: v for k, v in row.payload.items() if k in keep}
    checked = with_digest(row.point_id, payload, vector, terms, sig)
    return PointRecord(row.point_id, vector, terms, {**checked, BRANCHES: list(membership[0]), HIDDEN: list(membership[1])})


def repair(ws: Workspace) -> dict[str, list[str]]:
    """Undo crashed store writes of any branch: every journaled path's points are deleted and
    upserted again from the state, in every collection of the repository. Returns the
    journal ({branch: paths}); the rows stay until their branch's next sync commits."""
    journal = ws.state.journal()
    if not journal:
        return {}
    paths = sorted({p for ps in journal.values() for p in ps})
    log.warning("repairing after an interrupted sync", branches=sorted(journal), paths=len(paths))
    collections = {b.fingerprint: b.collection for b in ws.state.branches()}
    for fingerprint, collection in sorted(collections.items()):
        if not ws.store.has_collection(collection):
            continue  # rebuilt whole when a branch of it is next synced
        for path in paths:
            ws.store.delete_path(collection, path)
        snap = ws.state.snapshot(fingerprint, paths)
        enc = Encoder(snap)
        members = snap.members
        missing = upsert_members(ws, fingerprint, collection, [(m, enc(m.branches)) for m in members.values()])
        ws.store.flush(collection)
        optimize(ws, collection)  # after a crash: rare, and the journaled paths may be many
        for branch in {b for m in members.values() if m.row.path in missing for b in m.branches}:
            ws.state.write_journal(branch, sorted(missing))  # re-indexed by that branch's sync
    ws.state.clear_journal_of_gone_branches()
    return journal


def rebuild(ws: Workspace, fingerprint: str, collection: str, dim: int, journal_branch: str) -> set[str]:
    """Create a missing collection and fill it from the state and the cache: no embedding.
    Paths whose vectors are gone from the cache are journaled for ``journal_branch``.

    The manifest is read REBUILD_PATHS paths at a time (a layout conversion or a heal of a
    500k-point collection would otherwise hold every point's row and payload at once: 502 MB
    peak for sqlalchemy's 47,718, bench/results/scale-disk.json)."""
    ws.store.create_collection(collection, dim)
    paths = ws.state.member_paths(fingerprint)
    missing: set[str] = set()
    written = False
    for start in range(0, len(paths), REBUILD_PATHS):
        snap = ws.state.snapshot(fingerprint, paths[start : start + REBUILD_PATHS])
        enc = Encoder(snap)
        missing |= upsert_members(ws, fingerprint, collection, [(m, enc(m.branches)) for m in snap.members.values()])
        written = written or bool(snap.members)
        ws.store.flush(collection)
    ws.store.flush(collection)
    if written:
        optimize(ws, collection)
    else:
        ws.state.clear_unoptimized(collection)  # a new collection: nothing is waiting
    if missing:
        ws.state.write_journal(journal_branch, sorted(missing))
    return missing
