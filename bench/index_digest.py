"""A first index's CPU, and a digest of everything it wrote (issue 21: exact speed-ups).

    PYTHONPATH=<code tree> python bench/index_digest.py --index REPO   # index REPO under a fresh GITRAG_HOME
    python bench/index_digest.py HOME                                  # digest an existing GITRAG_HOME

``--index`` runs ``gitrag index --json --repo REPO`` in this process (the code tree on
``PYTHONPATH``) with ``GITRAG_HOME`` a new temporary folder (kept, its path printed), then
prints the CPU seconds of this process (the sync) and of its finished children (the pool
workers, ``getrusage``), the wall seconds, and the digest below.

The digest: a SHA-256 per table over its sorted rows, and one over them all, of
``cache.db`` (vectors with their fingerprint's name, sparse vectors, the points' vector
signatures, which are made from the vectors the store keeps) and of each repository's
``state.db`` (points with their payloads, files, symbol graphs, symbol names, and the
branches without their two timestamps). Row ids and ``history.db`` (its backfill is
bounded by time) are left out. Two code trees that write the same index print the same
digest.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

CACHE = {
    "vectors": "SELECT v.key, f.name, v.digest, v.vec FROM vectors v JOIN fingerprints f ON f.id = v.fp",
    "sparse": "SELECT key, version, digest, data FROM sparse",
    "signatures": "SELECT point, chunk, digest, sig FROM signatures",
}
STATE = {
    "points": "SELECT point_id, variant, path, blob, chunk_hash, payload FROM points",
    "files": "SELECT branch, path, blob, skip_reason FROM files",
    "symbols": "SELECT blob, variant, data FROM symbols",
    "symbol_names": "SELECT key, blob, variant, name, kind, parent, start_line, end_line, language FROM symbol_names",
    "branches": "SELECT name, collection, fingerprint, indexed_commit, chunker, materialized, root FROM branches",
}


def _table_digest(db: Path, query: str) -> tuple[str, int]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = sorted(repr(r).encode() for r in con.execute(query))
    finally:
        con.close()
    h = hashlib.sha256()
    for r in rows:
        h.update(len(r).to_bytes(8, "little") + r)
    return h.hexdigest(), len(rows)


def digest(home: Path) -> dict[str, object]:
    """{table: [sha256, rows]} for cache.db and every state.db under ``home``/data, and
    ``all``: the SHA-256 of those."""
    data = home / "data"
    out: dict[str, object] = {}
    for name, query in CACHE.items():
        out[f"cache.{name}"] = list(_table_digest(data / "cache.db", query))
    for state in sorted(data.glob("*/state.db")):
        for name, query in STATE.items():
            out[f"{state.parent.name}.{name}"] = list(_table_digest(state, query))
    out["all"] = hashlib.sha256(json.dumps(out, sort_keys=True).encode()).hexdigest()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("home", nargs="?", help="a GITRAG_HOME to digest")
    ap.add_argument("--index", metavar="REPO", help="first-index REPO under a fresh GITRAG_HOME, then digest it")
    args = ap.parse_args()
    if args.index:
        home = Path(tempfile.mkdtemp(prefix="gitrag-digest-"))
        os.environ["GITRAG_HOME"] = str(home)
        import gitrag
        from gitrag.surfaces.cli import main as cli

        wall = time.monotonic()
        sys.argv = ["gitrag", "index", "--json", "--repo", args.index]
        try:
            cli()
        except SystemExit as exc:
            if exc.code not in (None, 0):
                raise
        wall = time.monotonic() - wall
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        sync, workers = me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime
        print(json.dumps({"code": gitrag.__file__.rsplit("/gitrag/", 1)[0], "home": str(home),
                          "sync_cpu_s": round(sync, 2), "workers_cpu_s": round(workers, 2),
                          "total_cpu_s": round(sync + workers, 2), "wall_s": round(wall, 1),
                          "load_1min": os.getloadavg()[0], "digest": digest(home)}))
    elif args.home:
        print(json.dumps(digest(Path(args.home)), indent=1))
    else:
        ap.error("give a GITRAG_HOME or --index REPO")


if __name__ == "__main__":
    main()
