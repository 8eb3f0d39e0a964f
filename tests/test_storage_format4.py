"""An index written by the code before the positional payloads (issue 21: ``state.db``
format 3, each ``points`` payload a JSON object) is converted in place on first use by this
code: every payload rewritten as :func:`gitrag.index.state.stored_payload`'s array, each
reading back as the same fields in the same order, nothing embedded or chunked again, every
answer of the code search what the old code gave. The old code is this repository's own,
taken from its history (the tree just before the commit that made the state format 4), as
tests/test_storage_format3.py does for format 2.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gitrag import config
from gitrag.errors import StateError
from gitrag.git.repo import GitRepo
from gitrag.index.state import FORMAT_VERSION, State, loaded_payload, stored_payload
from tests.gitutil import Repo, index, project_package_before
from tests.reliability import functions
from tests.test_cache_format3 import _answers, _same_lists

_MARK = "FORMAT_VERSION = 3\n"


def _format3_code(tmp_path: Path) -> Path:
    """The gitrag package just before the state became format 4."""
    return project_package_before("gitrag/index/state.py", _MARK, tmp_path / "format3-code",
                                  "making the state format 4")


def test_an_index_of_format_3_is_converted_in_place_to_positional_payloads(repo: Repo, tmp_path: Path) -> None:
    old_code = _format3_code(tmp_path)
    repo.write("pkg/a.py", functions("alpha", 4))
    repo.write("pkg/b.py", functions("beta", 3))
    repo.write("README.md", "# Alpha and beta\n\nHow alpha answers beta, and gamma both.\n")
    repo.write("tests/test_a.py", "from pkg.a import alpha_1\n\n\ndef test_alpha():\n    assert alpha_1()\n")
    repo.commit("A")
    env = {**os.environ, "PYTHONPATH": str(old_code)}
    proc = subprocess.run([sys.executable, "-m", "gitrag", "index", "--json", "--repo", str(repo.path)],
                          capture_output=True, text=True, env=env, cwd=old_code, check=False)
    assert proc.returncode == 0, proc.stderr
    before = _answers(repo.path, old_code)
    assert all(before["code"])
    data = config.repo_data_dir(GitRepo(repo.path).common_dir)
    with sqlite3.connect(data / "state.db") as db:  # what the old code wrote, read as the old code reads it
        assert db.execute("SELECT value FROM meta WHERE key='format'").fetchone() == ("3",)
        old = {pid: list({**json.loads(p), "path": path, "blob": blob, "chunk_hash": h}.items())
               for pid, path, blob, h, p in db.execute("SELECT point_id, path, blob, chunk_hash, payload FROM points")}
        old_bytes = db.execute("SELECT sum(length(payload)) FROM points").fetchone()[0]
    assert old and any(len(p) > 10 for p in old.values())  # some with more fields than the positional ones

    s = index(repo.path)  # first use by this code: the state is converted as it opens
    assert s.chunks_embedded == 0 and s.paths_embedded == 0 and s.chunks_total == len(old)
    with sqlite3.connect(data / "state.db") as db:
        assert db.execute("SELECT value FROM meta WHERE key='format'").fetchone() == (str(FORMAT_VERSION),) == ("4",)
        stored = dict(db.execute("SELECT point_id, payload FROM points"))
    assert stored.keys() == old.keys() and all(isinstance(json.loads(p), list) for p in stored.values())
    assert sum(map(len, stored.values())) < 0.6 * old_bytes
    state = State(data)
    try:  # the same fields, in the same order
        got = {r.point_id: list(r.payload.items()) for r in state.points(state.branches()[0].name)}
    finally:
        state.close()
    assert got == old
    # the older store layout is rebuilt from the cache on the way (layout "trim"): scores within float32 rounding
    _same_lists(_answers(repo.path, None)["code"], before["code"])


def test_stored_payloads_read_back_as_given_in_either_form(tmp_path: Path) -> None:
    """A chunk's payload as an array (extras in a trailing object), any other as an object,
    each read back with the same fields in the same order; text that is neither is refused."""
    chunk = {"path": "a.py", "blob": "b" * 40, "start_byte": 0, "end_byte": 9, "start_line": 1, "end_line": 2,
             "symbol": None, "kind": "module", "language": "python", "chunk_hash": "c" * 64}
    with_extras = {**chunk, "prose": 1.0, "test": 0.5}
    other = {"kind": "module", "start_byte": 0, "odd": [1, {"x": 2}]}
    for payload in (chunk, with_extras, other):
        text = stored_payload(payload)
        assert not {"path", "blob", "chunk_hash"} & set(json.loads(text) if text.startswith("{") else ())
        back = loaded_payload(text, "a.py", "b" * 40, "c" * 64)
        rest = [k for k in payload if k not in ("path", "blob", "chunk_hash")]
        assert list(back) == [*rest, "path", "blob", "chunk_hash"] and back == {**payload, **back}
    assert stored_payload(chunk).startswith("[0,9,1,2,null,")
    assert stored_payload(with_extras).endswith(',{"prose":1.0,"test":0.5}]')
    for bad in ("[1,2,3]", '[0,9,1,2,null,"module","python",7]', "7", "[0,9"):
        with pytest.raises(ValueError):
            loaded_payload(bad, "a.py", "b", "c")
    db = sqlite3.connect(tmp_path / "state.db")
    with pytest.raises(StateError, match="damaged"):
        loaded_payload("[1,2,3]", "a.py", "b", "c", db)
    db.close()
