"""The store file record: what gitrag last saw of a collection's files, checked before the
engine opens them (issue 23).

A damaged file can make the engine abort the whole process while loading it (a flipped
length asks Rust for a 25 GB allocation, which aborts with SIGABRT; a flipped bit in a
payload index's ``status.dat`` grows a file without end): no exception reaches Python,
so the check has to come *before* ``EdgeShard.load``. The record, ``<collection>/gitrag-files``
(JSON), holds for every file of the collection's folder its size, ``mtime_ns`` and, for files
of at most :data:`DIGEST_MAX` bytes, a BLAKE2b digest of its bytes. :func:`check` compares the
folder with it: a file missing, added, of another size, or changed (small files: another
digest; larger ones: another mtime) means something other than gitrag's engine wrote there,
and the caller (gitrag.index.store.edge) raises StoreDamaged, which gitrag.index.heal answers
by moving the collection aside and rebuilding it from the vector cache and git.

Written (:func:`write`, atomically: a temporary file, fsync, rename, fsync of the folder)
after every open, flush, optimize and close gitrag makes, while it holds the collection's
lock. Files gitrag itself manages at the folder's top level (``gitrag-*``: the layout marker,
this record and its temporary file) are outside it.

Crashes: the engine writes the files between two records (an upsert writes its memory maps
before the flush). So before the first write after a record (an update, an optimize) the
record is replaced by a mark saying the collection is being written (:func:`mark_writing`);
the flush that ends the writes records the files again. A process killed in between leaves
the mark: the next open cannot tell its writes from damage, trusts the files as gitrag did
before the record existed (the engine's WAL and gitrag's journal, gitrag.index.views.repair,
recover a killed sync) and records them after the load: no heal. The price: damage done to a
collection while a process was killed writing it is left to the engine and the per-query
checks (gitrag.index.integrity).

Opens, flushes and closes with no write before them rewrite a few files with the same bytes
(new mtimes; every ``ask`` does), which is why the record is taken again right after each. A
process killed in the milliseconds between such a flush or close and the record's rename
leaves a record the new mtimes differ from: the next open rebuilds the collection *once*
(nothing embedded; the rebuilt collection is recorded, so a healthy store never looks
damaged twice). A collection without a record (written by an older gitrag, or the record
deleted) is not damaged either: it is trusted and recorded by its first open.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

RECORD = "gitrag-files"
_OWN = "gitrag-"  # top-level files gitrag manages itself: outside the record
DIGEST_MAX = 64 * 1024  # files up to this many bytes are compared by their bytes, larger ones by mtime
_FORMAT = 1

# path relative to the folder -> (size in bytes, mtime_ns, BLAKE2b hex digest or None above DIGEST_MAX)
Entry = tuple[int, int, str | None]


def _digest(path: Path) -> str:
    return hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()


def take(folder: Path) -> dict[str, Entry]:
    """The files below ``folder`` (gitrag's own top-level ``gitrag-*`` files left out) as
    {relative path: (size, mtime_ns, digest or None)}. A file that vanishes while it is read is
    left out. OSError when the folder cannot be read."""
    out: dict[str, Entry] = {}
    for dirpath, _dirs, names in os.walk(folder):
        top = dirpath == str(folder)
        for name in names:
            if top and name.startswith(_OWN):
                continue
            path = Path(dirpath, name)
            try:
                st = path.stat()
                digest = _digest(path) if st.st_size <= DIGEST_MAX else None
            except FileNotFoundError:
                continue
            out[str(path.relative_to(folder))] = (st.st_size, st.st_mtime_ns, digest)
    return out


def write(folder: Path) -> None:
    """Record the files of ``folder`` now, atomically (temp file, fsync, rename, fsync of the
    folder). OSError when it cannot (the caller then :func:`forget`s the old record)."""
    _put(folder, {"format": _FORMAT, "files": take(folder)})


def mark_writing(folder: Path) -> None:
    """Replace the record by the mark "being written" (atomically, as :func:`write`): the
    files may change until the next :func:`write`. OSError when it cannot."""
    _put(folder, {"format": _FORMAT, "writing": True})


def _put(folder: Path, doc: dict[str, object]) -> None:
    body = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    tmp = folder / f"{RECORD}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(body)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, folder / RECORD)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    for stale in folder.glob(f"{RECORD}.tmp-*"):  # a write a crash cut short (the caller holds the lock)
        stale.unlink(missing_ok=True)


def forget(folder: Path) -> None:
    """Delete the record (no error if missing or if it cannot be deleted): a record that
    could not be brought up to date must not make the next open take the files as damaged."""
    try:
        (folder / RECORD).unlink(missing_ok=True)
    except OSError:
        pass


def check(folder: Path) -> str | None:
    """None when the files below ``folder`` are as last recorded (or there is no record: a
    collection of an older gitrag; or the mark "being written"); else a few words saying what differs (the first
    difference found: "segments/x/segment.json changed", "... missing", "... added", or
    "its file record is unreadable")."""
    try:
        text = (folder / RECORD).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return f"its file record {RECORD} is unreadable"
    try:
        doc = json.loads(text)
        fmt = doc.get("format")
        if isinstance(fmt, int) and fmt > _FORMAT:
            return None  # a newer gitrag's format: nothing this one can check
        if fmt != _FORMAT:
            return f"its file record {RECORD} is unreadable"
        if doc.get("writing") is True:
            return None  # a process was killed writing it: the engine's word (see the module's docstring)
        want = {str(k): (int(v[0]), int(v[1]), v[2] if v[2] is None else str(v[2])) for k, v in doc["files"].items()}
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return f"its file record {RECORD} is unreadable"
    have = _stat(folder)
    for rel, (size, mtime, digest) in sorted(want.items()):
        got = have.get(rel)
        if got is None:
            return f"{rel} missing"
        if got[0] != size:
            return f"{rel} changed size ({size} -> {got[0]} bytes)"
        if digest is not None and size <= DIGEST_MAX:
            try:
                if _digest(folder / rel) != digest:
                    return f"{rel} changed"
            except FileNotFoundError:
                return f"{rel} missing"
        elif got[1] != mtime:
            return f"{rel} changed"
    added = sorted(set(have) - set(want))
    return f"{added[0]} added" if added else None


def _stat(folder: Path) -> dict[str, tuple[int, int]]:
    """{relative path: (size, mtime_ns)} of the files below ``folder`` (gitrag's own left out)."""
    out: dict[str, tuple[int, int]] = {}
    for dirpath, _dirs, names in os.walk(folder):
        top = dirpath == str(folder)
        for name in names:
            if top and name.startswith(_OWN):
                continue
            path = os.path.join(dirpath, name)
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue
            out[os.path.relpath(path, folder)] = (st.st_size, st.st_mtime_ns)
    return out
