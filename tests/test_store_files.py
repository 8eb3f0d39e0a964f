"""The store file record (gitrag.index.store.files, issue 23): a collection's files changed
behind gitrag are found before the engine loads them; what gitrag writes itself, an index of
an older gitrag and a process killed while writing are not damage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gitrag.errors import StoreDamaged
from gitrag.index.store import edge as edge_mod
from gitrag.index.store import files as file_record
from gitrag.index.store.base import PointRecord, SparseVec
from gitrag.index.store.edge import EdgeStore

COLL = "c"
IDS = [f"6d2b6c6e-0000-4000-8000-00000000000{i}" for i in range(1, 5)]


def _point(i: int) -> PointRecord:
    dense = np.zeros(8, dtype=np.float32)
    dense[i] = 1.0
    return PointRecord(IDS[i], dense, SparseVec([i], [1.0]), {"path": f"f{i}.py", "branches": ["main"]})


def _made(root: Path) -> Path:
    store = EdgeStore(root)
    try:
        store.create_collection(COLL, 8)
        store.upsert(COLL, [_point(i) for i in range(len(IDS))])
        store.flush(COLL)
    finally:
        store.close()
    return root / COLL


def _record(folder: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((folder / file_record.RECORD).read_text())
    return doc


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The folders the real engine was asked to load (EdgeShard.load, wrapped)."""
    seen: list[str] = []
    real = edge_mod.EdgeShard.load

    def load(path: str, *args: Any) -> Any:
        seen.append(path)
        return real(path, *args)

    monkeypatch.setattr(edge_mod.EdgeShard, "load", staticmethod(load))
    return seen


def _small(folder: Path) -> Path:
    return next(p for p in sorted(folder.rglob("status.dat")) if 0 < p.stat().st_size <= file_record.DIGEST_MAX)


def _big(folder: Path) -> Path:
    return max(folder.rglob("*.dat"), key=lambda p: p.stat().st_size)


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[0] ^= 0x40
    st = path.stat()
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # the mtime put back: bit rot, only the bytes differ


def _truncate(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


DAMAGE = {
    "a flipped bit in a small file, its mtime put back": lambda f: _flip(_small(f)),
    "a large file truncated": lambda f: _truncate(_big(f)),
    "a segment's file deleted": lambda f: _big(f).unlink(),
    "a file added": lambda f: (next((f / "segments").iterdir()) / "stray.dat").write_bytes(b"x"),
    "the record itself no longer JSON": lambda f: (f / file_record.RECORD).write_text("{\"format\": 1, \"fil"),
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_a_file_changed_behind_gitrag_is_damage_found_before_the_engine_loads_it(
        tmp_path: Path, loads: list[str], kind: str) -> None:
    folder = _made(tmp_path / "q")
    DAMAGE[kind](folder)
    loads.clear()
    store = EdgeStore(tmp_path / "q")
    try:
        with pytest.raises(StoreDamaged) as caught:
            store.ids(COLL)
    finally:
        store.close()
    assert loads == []  # the engine never read the damaged files (it may abort the process there)
    text = str(caught.value)
    assert "is damaged" in text and "gitrag index --rebuild" in text and "\n" not in text, text
    assert ("file record" in text) == kind.startswith("the record"), text


def test_an_untouched_collection_opens_and_its_record_follows_every_write(tmp_path: Path, loads: list[str]) -> None:
    folder = _made(tmp_path / "q")
    first = _record(folder)
    assert "writing" not in first and any(k.endswith("segment.json") for k in first["files"])
    assert not any(k.startswith("gitrag-") for k in first["files"])  # the layout marker, the record: gitrag's own
    for _ in range(2):  # open, read, close: every time the files match
        store = EdgeStore(tmp_path / "q")
        try:
            assert store.ids(COLL) == set(IDS)
            store.delete(COLL, [IDS[0]])
            assert _record(folder) == {"format": 1, "writing": True}  # written from here until the flush
            store.upsert(COLL, [_point(0)])
            store.flush(COLL)
            assert "files" in _record(folder)
        finally:
            store.close()
    assert len(loads) == 2 and file_record.check(folder) is None


def test_the_files_gitrag_manages_itself_are_outside_the_record(tmp_path: Path) -> None:
    folder = _made(tmp_path / "q")
    (folder / "gitrag-layout").unlink()  # what tests/test_store_layout.py does to make an old-layout collection
    (folder / f"{file_record.RECORD}.tmp-99999").write_text("half")  # a record's write a crash cut short
    store = EdgeStore(tmp_path / "q")
    try:
        assert store.ids(COLL) == set(IDS)
    finally:
        store.close()
    assert not list(folder.glob(f"{file_record.RECORD}.tmp-*"))  # the stale one deleted by the next write


def test_a_collection_of_an_older_gitrag_without_a_record_is_trusted_and_recorded(tmp_path: Path) -> None:
    folder = _made(tmp_path / "q")
    (folder / file_record.RECORD).unlink()  # the code before the record wrote none
    store = EdgeStore(tmp_path / "q")
    try:
        assert store.ids(COLL) == set(IDS)
        assert "files" in _record(folder)  # recorded by its first open
    finally:
        store.close()
    _truncate(_big(folder))  # and from then on checked
    store = EdgeStore(tmp_path / "q")
    try:
        with pytest.raises(StoreDamaged):
            store.ids(COLL)
    finally:
        store.close()


_KILLED = """
import os, sys, numpy as np
from gitrag.index.store.edge import EdgeStore
from gitrag.index.store.base import PointRecord, SparseVec
s = EdgeStore(sys.argv[1])
if sys.argv[2] == "write":
    s.upsert("c", [PointRecord("6d2b6c6e-0000-4000-8000-000000000009", np.ones(8, np.float32), SparseVec([9], [1.0]), {"path": "x"})])
else:
    s.ids("c")
os._exit(0)  # killed: no flush, no close
"""


@pytest.mark.parametrize("doing", ["write", "read"])
def test_a_process_killed_while_writing_or_reading_leaves_no_false_damage(tmp_path: Path, doing: str) -> None:
    folder = _made(tmp_path / "q")
    subprocess.run([sys.executable, "-c", _KILLED, str(tmp_path / "q"), doing], check=True, timeout=120)
    # killed writing: the mark "being written" (the engine's word goes); killed reading: the
    # record taken after its load, which rewrote file times
    assert ("writing" in _record(folder)) == (doing == "write")
    store = EdgeStore(tmp_path / "q")
    try:
        assert set(IDS) <= store.ids(COLL)
        assert "files" in _record(folder)  # recorded again after this load
    finally:
        store.close()
    assert file_record.check(folder) is None


_LEFT_OPEN = """
import sys
from gitrag.index.store.edge import EdgeStore
s = EdgeStore(sys.argv[1])
print(len(s.ids("c")))
# exits normally without s.close(): the engine's shards are dropped at exit
"""


def test_a_process_that_exits_without_closing_the_store_leaves_no_false_damage(tmp_path: Path, loads: list[str]) -> None:
    folder = _made(tmp_path / "q")
    done = subprocess.run([sys.executable, "-c", _LEFT_OPEN, str(tmp_path / "q")], check=True, timeout=120,
                          capture_output=True, text=True)
    assert done.stdout.strip() == str(len(IDS))
    # the shards it left open were closed (and recorded) at its exit, so the files match the
    # record: the next open loads the collection as it is (before: the dropped shard rewrote a
    # tracker file and the next open healed the whole collection)
    assert file_record.check(folder) is None
    store = EdgeStore(tmp_path / "q")
    try:
        assert set(IDS) <= store.ids(COLL)
    finally:
        store.close()
    assert loads == [str(folder)]
