"""``gitrag index --publish``: write a branch's index to the team server, for every reader.

The writer (a CI job, docs/team.md) first syncs its own local index as usual; publishing
then copies what a reader needs from it to the team collection (gitrag.index.team names it):

- points: the local points of the branch (their vectors and payloads exactly as written,
  ``vsig`` and ``digest`` included) with server membership: ``branches`` = the tags of the
  published branches whose manifest holds the point's (path, blob) (``hidden`` empty: a
  server branch has no root). All points of one collection share one pipeline and embedder,
  so (path, blob) decides which points a file has;
- records (gitrag.index.store.meta): per branch its record (commit, generation, pipeline,
  fingerprint) and manifest parts (path, blob, skip reason), the symbol graph per blob.

Order, so a writer killed anywhere leaves nothing a reader or the next writer trusts wrongly:

    lease -> repair a dead writer's journal -> journal the touched paths (committed)
    -> the new generation's manifest parts and symbol graphs (read by nobody yet)
    -> points: upserts, deletes, membership of the touched paths
    -> check the lease is still ours -> the branch record names the new generation (one write)
    -> old parts and the journal deleted -> lease released

A reader follows the branch record only, so it sees the old or the new generation, never
half of one; points of an unfinished publish that no committed manifest names are left out
of its candidates (they have no manifest row). The next writer finds the journal, includes
its paths in what it recomputes (membership from the committed manifests, so a dead
writer's points are removed or corrected) and deletes manifest parts no record names.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from gitrag.config import Settings
from gitrag.errors import ConfigError, NotIndexed, StoreError, TeamPartsGone
from gitrag.index import team
from gitrag.index.chunking import CHUNKER_VERSION
from gitrag.index.integrity import SIGNATURE, with_digest
from gitrag.index.state import branch_tag
from gitrag.index.store import BRANCHES, HIDDEN, PointRecord
from gitrag.index.store.meta import MetaCollection, record_id, scroll_paths
from gitrag.index.store.server import ServerStore
from gitrag.index.workspace import Workspace

PART_ROWS = 2_000  # manifest rows (or journal paths) per record
PATH_BATCH = 256  # touched paths per round of point writes

Manifest = dict[str, tuple[str, str | None]]  # path -> (blob, skip reason or None)


@dataclass
class PublishSummary:
    """What one publish did (``index --publish --json``: ``publish``)."""

    server: str
    collection: str
    branch: str
    commit: str
    previous_commit: str | None = None
    generation: int = 0
    files: int = 0
    points: int = 0
    points_upserted: int = 0
    points_deleted: int = 0
    payloads_updated: int = 0
    paths_repaired: int = 0
    took_over: str | None = None  # the lease it replaced: a dead or expired writer's
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def branch_record_id(name: str) -> str:
    return record_id("branch", name)


def part_id(name: str, gen: int, i: int) -> str:
    return record_id("files", name, str(gen), str(i))


def symbols_id(blob: str, variant: str) -> str:
    return record_id("symbols", blob, variant)


def manifest_of(meta: MetaCollection, record: dict[str, Any]) -> Manifest:
    """The manifest a branch record names (its generation's parts, all of them)."""
    name, gen, parts = record["branch"], int(record["gen"]), int(record["parts"])
    got = meta.get(part_id(name, gen, i) for i in range(parts))
    if len(got) != parts:
        raise TeamPartsGone(f"{meta.name}: branch {name!r} names {parts} manifest parts, {len(got)} exist; "
                         f"run `gitrag index --publish` on the writer to publish it again")
    out: Manifest = {}
    for payload in got.values():
        for path, blob, skip in payload["rows"]:
            out[path] = (blob, skip)
    return out


def journal_of(meta: MetaCollection) -> dict[str, dict[str, Any]]:
    return meta.find(kind="journal")


def publish(ws: Workspace, server: ServerStore, settings: Settings, *, wait: float = 0.0,
            notice: Callable[[str], None] | None = None,
            progress: Callable[[str, int, int], None] | None = None, as_branch: str = "") -> PublishSummary:
    """Publish the current branch's local index (synced to HEAD by the caller) to the team
    collection; see the module doc. ``wait``: seconds to wait for another writer's lease.
    ``as_branch``: the name to publish it under (a CI job on a detached HEAD: the branch it
    built), else the current branch's. Raises NotIndexed (the branch is not indexed at HEAD),
    TeamBusy, StoreError, ConfigError (an ``as_branch`` no git branch could be named)."""
    t0 = time.perf_counter()
    from gitrag.index.indexer import Indexer

    name = ws.repo.branch()
    head = ws.repo.require_head()
    b = ws.state.branch(name)
    if b is None or b.indexed_commit != head:
        raise NotIndexed(f"branch {name!r} is not indexed at HEAD; run `gitrag index` before publishing")
    left = ws.state.journal_paths(name)
    if left:  # chunks that failed to embed: a reader would miss them
        raise NotIndexed(f"branch {name!r} has {len(left)} path(s) left to redo (chunks that failed to embed); "
                         f"run `gitrag index` again before publishing")
    pipeline = Indexer(ws).pipeline
    published = as_branch or name
    if as_branch and (as_branch.strip() != as_branch or not as_branch.isprintable() or " " in as_branch):
        raise ConfigError(f"--as-branch {as_branch!r} is not a branch name")
    coll = team.collection_name(team.team_id(ws.repo, settings, ws.data_dir), b.fingerprint, pipeline)
    summary = PublishSummary(server.url, coll, published, head)
    server.create_collection(coll, ws.embedder.dim)
    meta = MetaCollection(server, coll)
    meta.ensure()
    lease = team.acquire(meta, settings.team_lease_seconds, wait, notice)
    if lease.took_over is not None:
        summary.took_over = team.describe(lease.took_over)
    try:
        _publish(ws, server, meta, lease, settings, b, published, pipeline, coll, summary, progress)
    finally:
        team.release(meta, lease)
    summary.seconds = round(time.perf_counter() - t0, 3)
    return summary


def _publish(ws: Workspace, server: ServerStore, meta: MetaCollection, lease: team.Lease, settings: Settings,
             b: Any, name: str, pipeline: str, coll: str, summary: PublishSummary,
             progress: Callable[[str, int, int], None] | None) -> None:
    """The publish under the lease; ``b``: the local branch, ``name``: the name published."""
    local = b.name
    journal = journal_of(meta)
    journaled = {p for rec in journal.values() for p in rec.get("paths", ())}
    records = {r["branch"]: r for r in meta.find(kind="branch").values()}
    if journal:  # a writer died: parts of a generation no record names are its leftovers
        named = {part_id(n, int(r["gen"]), i) for n, r in records.items() for i in range(int(r["parts"]))}
        meta.delete(set(meta.find(kind="files")) - named)
    manifests = {n: manifest_of(meta, r) for n, r in records.items()}
    old = manifests.get(name, {})
    new: Manifest = {p: (r.blob, r.skip_reason) for p, r in ws.state.files(local).items()}
    touched = sorted({p for p in old.keys() | new.keys() if old.get(p) != new.get(p)} | journaled)
    summary.previous_commit = records.get(name, {}).get("commit")
    summary.paths_repaired = len(journaled)
    # 1. the journal: what this publish may change in the points collection
    mine = {record_id("journal", lease.token, str(i)): {"kind": "journal", "branch": name, "part": i,
                                                        "paths": touched[i * PART_ROWS : (i + 1) * PART_ROWS]}
            for i in range((len(touched) + PART_ROWS - 1) // PART_ROWS)}
    meta.put(mine)
    meta.delete(journal)  # the dead writer's: its paths are in ours now
    # 2. the new generation's manifest and the graphs of its new blobs (nobody reads them yet)
    gen = int(records.get(name, {}).get("gen", 0)) + 1
    rows = sorted([p, blob, skip] for p, (blob, skip) in new.items())
    parts = (len(rows) + PART_ROWS - 1) // PART_ROWS
    meta.put({part_id(name, gen, i): {"kind": "files", "branch": name, "gen": gen, "part": i,
                                      "rows": rows[i * PART_ROWS : (i + 1) * PART_ROWS]} for i in range(parts)})
    _put_symbols(ws, meta, local, [p for p in touched if p in new and new[p][1] is None])
    # 3. the points of the touched paths
    manifests[name] = new
    holders: dict[tuple[str, str], list[str]] = {}

    def members(path: str, blob: str) -> list[str]:
        key = (path, blob)
        if key not in holders:
            holders[key] = sorted(branch_tag(n) for n, m in manifests.items() if m.get(path) == (blob, None))
        return holders[key]

    renewed = time.monotonic()
    for start in range(0, len(touched), PATH_BATCH):
        batch = touched[start : start + PATH_BATCH]
        if progress is not None:
            progress("publish", start, len(touched))
        on_server = dict(scroll_paths(server, coll, batch))
        deletes: list[str] = []
        moves: dict[tuple[str, ...], list[str]] = {}
        for pid, payload in on_server.items():
            want = members(payload.get("path", ""), payload.get("blob", ""))
            if not want:
                deletes.append(pid)
            elif sorted(payload.get(BRANCHES) or ()) != want or payload.get(HIDDEN):
                moves.setdefault(tuple(want), []).append(pid)
        fresh = [r for r in ws.state.points(local, batch) if r.point_id not in on_server]
        if fresh:
            got = ws.store.records(b.collection, [r.point_id for r in fresh])
            lost = [r.point_id for r in fresh if r.point_id not in got]
            if lost:
                raise StoreError(f"the local index lacks {len(lost)} points of branch {local!r}; run "
                                 f"`gitrag index` (and `gitrag doctor`) before publishing")
            points = []
            for r in fresh:
                payload, dense, sparse_vec = got[r.point_id]
                if sparse_vec is None:  # every point gitrag writes has one; a store that lost it is damaged
                    raise StoreError(f"point {r.point_id} of branch {local!r} lost its sparse vector; run `gitrag doctor`")
                # the whole payload from the manifest row (the local store may keep only the filter
                # fields: Store.payload_fields), the store's vector signature, a digest of it all
                whole = with_digest(r.point_id, r.payload, dense, sparse_vec, payload.get(SIGNATURE))
                points.append(PointRecord(r.point_id, dense, sparse_vec, {**whole, BRANCHES:
                                          members(r.path, r.payload.get("blob", "")), HIDDEN: []}))
            server.upsert(coll, points)
            summary.points_upserted += len(points)
        server.delete(coll, deletes)
        for tags, ids in moves.items():
            server.set_payload_of(coll, ids, {BRANCHES: list(tags), HIDDEN: []})
        summary.points_deleted += len(deletes)
        summary.payloads_updated += sum(len(ids) for ids in moves.values())
        if time.monotonic() - renewed > settings.team_lease_seconds / 3:
            team.renew(meta, lease, settings.team_lease_seconds)
            renewed = time.monotonic()
    # 4. commit: still ours? then one write makes the new generation the published one
    team.check(meta, lease)
    summary.points = ws.state.point_count(local)
    summary.files = len(new)
    summary.generation = gen
    meta.put({branch_record_id(name): {
        "kind": "branch", "branch": name, "tag": branch_tag(name), "commit": summary.commit, "gen": gen,
        "parts": parts, "pipeline": pipeline, "fingerprint": b.fingerprint, "files": len(new),
        "points": summary.points, "published_at": time.time(), "by": socket.gethostname()}})
    old_gen = records.get(name, {})
    if old_gen:
        meta.delete(part_id(name, int(old_gen["gen"]), i) for i in range(int(old_gen["parts"])))
    # only ours: a journal written meanwhile by a writer that lost the lease race is the next one's to repair
    meta.delete(mine)


def _put_symbols(ws: Workspace, meta: MetaCollection, branch: str, paths: list[str]) -> None:
    """The symbol graphs of ``paths``' blobs that the server does not hold yet."""
    blobs = ws.state.files_of(branch, paths)
    by_id = {symbols_id(row.blob, CHUNKER_VERSION): row for row in blobs.values()}
    have = set(meta.get(by_id))
    out: dict[str, dict[str, Any]] = {}
    for rid, row in by_id.items():
        if rid in have:
            continue
        indexed, graph = ws.state.file_symbols(branch, row.path, CHUNKER_VERSION)
        if indexed and graph is not None:
            out[rid] = {"kind": "symbols", "blob": row.blob, "variant": CHUNKER_VERSION, "data": graph}
    meta.put(out)
