"""A reader's copy of what a team server publishes: manifests, point rows and symbol graphs.

A reader (docs/team.md) answers from the server's points collection, but the ranking reads
the manifest, the point payloads and the symbol graph from a :class:`gitrag.index.state.State`
(SQLite primary-key lookups, see gitrag.query.retrieval). So the published records are
copied into a state of its own, ``<data dir>/team/<collection>/state.db`` (the shared vector
cache beside it), with one branch row per local branch: named like the branch, its
``collection`` the server's, its ``root`` the published branch it reads (so its view is
``branches ∋ tag(published)``: :class:`gitrag.index.store.BranchView`), its indexed commit
the published commit. Only what changed since the last copy is read: the branch record's
generation is compared first (one request), then only paths whose blob changed get their
point rows (payloads scrolled by path, no vectors) and graphs. Nothing is embedded.

Which published branch: the one of the same name whose commit this clone has; else the
published branch nearest to HEAD by merge-base distance. Raises TeamUnavailable (one line)
when nothing fits, StoreError when the server fails.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gitrag import config
from gitrag.config import Settings
from gitrag.errors import TeamPartsGone, TeamUnavailable
from gitrag.index import publish as pub
from gitrag.index import team
from gitrag.index.chunking import CHUNKER_VERSION
from gitrag.index.integrity import DIGEST, SIGNATURE
from gitrag.index.state import FileUpdate, PointRow, State
from gitrag.index.store import BRANCHES, HIDDEN
from gitrag.index.store.meta import MetaCollection, scroll_paths
from gitrag.index.store.server import ServerStore
from gitrag.index.workspace import Workspace

PATH_BATCH = 256
_DROP = (BRANCHES, HIDDEN, SIGNATURE, DIGEST)  # the store's own fields: not in a manifest row's payload


@dataclass
class Mirror:
    """A reader's workspace over the server (``ws``: state = the mirror, store = the server)
    and what it answers from."""

    ws: Workspace
    collection: str
    published: dict[str, Any]  # the branch record read from the server
    pulled_paths: int  # paths whose rows were copied now (0: the copy was current)

    @property
    def published_branch(self) -> str:
        return str(self.published["branch"])


def _pick(ws: Workspace, records: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    repo = ws.repo
    head = repo.require_head()
    same = records.get(name)
    if same is not None and repo.has_commit(same["commit"]):
        return same
    best, dist = None, None
    for rec in records.values():
        if not repo.has_commit(rec["commit"]) or repo.merge_base(rec["commit"], head) is None:
            continue
        d = repo.distance(rec["commit"], head)
        if dist is None or d < dist or (d == dist and rec["branch"] < best["branch"]):  # type: ignore[index]  # best is set whenever dist is
            best, dist = rec, d
    if best is not None:
        return best
    if same is not None:
        raise TeamUnavailable(f"the team server has branch {name!r} at {same['commit'][:12]}, which this clone does "
                              f"not have: run `git fetch`")
    raise TeamUnavailable(f"no branch published on the team server shares history with {name!r}")


def open_mirror(ws: Workspace, server: ServerStore, settings: Settings) -> Mirror:
    """The reader's workspace for the current branch, its copy brought to the server's
    published generation (see the module doc). ``ws``: the local workspace (its embedder
    is shared: it embeds the question only)."""
    from gitrag.index.indexer import Indexer

    name = ws.repo.branch()
    pipeline = Indexer(ws).pipeline
    coll = team.collection_name(team.team_id(ws.repo, settings, ws.data_dir), ws.embedder.fingerprint, pipeline)
    meta = MetaCollection(server, coll)
    if not server.has_collection(coll) or not meta.exists():
        raise TeamUnavailable(f"nothing is published on the team server {server.url} for this repository with this "
                              f"embedder and pipeline (collection {coll}); publish with `gitrag index --publish`")
    folder = config.private_mkdir(Path(ws.data_dir) / "team" / coll)
    state = State(folder, cache_path=ws.state.cache.path)
    try:
        for attempt in (1, 2):
            records = {r["branch"]: r for r in meta.find(kind="branch").values()}
            rec = _pick(ws, records, name)
            try:
                pulled = _pull(state, server, meta, coll, name, rec)
                break
            except TeamPartsGone:  # a publish switched generations while we read: read the new one
                if attempt == 2:
                    raise
    except BaseException:
        state.close()
        raise
    mirror_ws = replace(ws, data_dir=folder, state=state, store=server)
    return Mirror(mirror_ws, coll, rec, pulled)


def _key(name: str) -> str:
    return f"team:{name}"


def _pull(state: State, server: ServerStore, meta: MetaCollection, coll: str, name: str,
          rec: dict[str, Any]) -> int:
    """Bring the mirror's row ``name`` to the record ``rec``; returns the paths copied."""
    stamp = f"{rec['branch']}\0{rec['gen']}\0{rec['commit']}"
    row = state.db.execute("SELECT value FROM meta WHERE key=?", (_key(name),)).fetchone()
    have = state.branch(name)
    if row is not None and row[0] == stamp and have is not None:
        _mark_writing(state, meta, name)
        return 0
    manifest = pub.manifest_of(meta, rec)
    known = state.files(name) if have is not None and have.root == rec["branch"] else {}
    changed = sorted(p for p in known.keys() | manifest.keys()
                     if p not in known or p not in manifest or (known[p].blob, known[p].skip_reason) != manifest[p])
    updates: list[FileUpdate] = []
    for start in range(0, len(changed), PATH_BATCH):
        batch = changed[start : start + PATH_BATCH]
        rows: dict[str, list[PointRow]] = {}
        wanted = {p: manifest[p][0] for p in batch if p in manifest and manifest[p][1] is None}
        if wanted:
            for pid, payload in scroll_paths(server, coll, list(wanted)):
                path = payload.get("path", "")
                if wanted.get(path) == payload.get("blob"):
                    clean = {k: v for k, v in payload.items() if k not in _DROP}
                    rows.setdefault(path, []).append(PointRow(pid, path, str(payload.get("chunk_hash", "")), clean))
        for p in batch:
            if p not in manifest:
                updates.append(FileUpdate(p, None))
            else:
                blob, skip = manifest[p]
                points = sorted(rows.get(p, []), key=lambda r: (r.payload.get("start_byte", 0), r.point_id))
                updates.append(FileUpdate(p, blob, skip, points if skip is None else []))
    graphs = _graphs(state, meta, [(u.path, u.blob) for u in updates if u.blob is not None and u.skip_reason is None])
    with state.transaction() as db:
        if have is None or have.root != rec["branch"] or have.collection != coll:
            db.execute("DELETE FROM branches WHERE name=?", (name,))
            db.execute("DELETE FROM files WHERE branch=?", (name,))
            now = time.time()
            db.execute("INSERT INTO branches VALUES(?,?,?,?,?,?,?,1,?)",
                       (name, coll, rec["fingerprint"], rec["commit"], now, now, rec["pipeline"], rec["branch"]))
        db.execute("DELETE FROM journal WHERE branch=?", (name,))
    state.put_symbols_many(graphs)
    state.commit_paths(name, updates, rec["commit"], rec["pipeline"])
    with state.transaction() as db:
        db.execute("INSERT OR REPLACE INTO meta VALUES(?,?)", (_key(name), stamp))
    _mark_writing(state, meta, name)
    return len(changed)


_WRITING = "(team publish under way)"


def _mark_writing(state: State, meta: MetaCollection, name: str) -> None:
    """A journal row in the copy while the server has a publish's journal (one under way, or
    a dead writer's not yet repaired): the points of its paths may differ from the published
    manifest until it commits, so gitrag.index.integrity.check_count does not count them."""
    writing = bool(pub.journal_of(meta))
    with state.transaction() as db:
        if writing:
            db.execute("INSERT OR IGNORE INTO journal VALUES(?,?)", (name, _WRITING))
        else:
            db.execute("DELETE FROM journal WHERE branch=? AND path=?", (name, _WRITING))


def _graphs(state: State, meta: MetaCollection, files: list[tuple[str, str]]) -> list[tuple[str, str, dict[str, Any]]]:
    """The published symbol graphs of the blobs of ``files`` the mirror lacks."""
    blobs = sorted({blob for _, blob in files})
    missing = [b for b in blobs
               if state.db.execute("SELECT 1 FROM symbols WHERE blob=? AND variant=?", (b, CHUNKER_VERSION)).fetchone()
               is None]
    got = meta.get(pub.symbols_id(b, CHUNKER_VERSION) for b in missing)
    return [(p["blob"], p["variant"], json.loads(p["data"])) for p in got.values()]
