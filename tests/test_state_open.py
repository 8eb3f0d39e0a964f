"""Opening a new state while another process creates the same one (a daemon and a CLI, or
two hooks' daemons starting at once) must not fail: both see no format row, both write it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gitrag.index import state as state_mod
from gitrag.index.state import FORMAT_VERSION, State


class _RacingConnection:
    """A real connection whose first read of the format row is followed, before this process
    writes it, by another connection writing it (what a second process does in the race)."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self._db, self._path, self.raced = db, path, False

    def execute(self, sql: str, *args):
        cur = self._db.execute(sql, *args)
        if "FROM meta WHERE key='format'" in sql and not self.raced:
            rows = cur.fetchall()
            self.raced = True
            other = sqlite3.connect(self._path, isolation_level=None)
            other.execute("INSERT INTO meta VALUES('format', ?)", (str(FORMAT_VERSION),))
            other.close()
            return _Rows(rows)
        return cur

    def __getattr__(self, name: str):
        return getattr(self._db, name)


class _Rows:
    def __init__(self, rows: list) -> None:
        self._rows = rows

    def fetchone(self):
        return self._rows[0] if self._rows else None


def test_a_state_created_by_another_process_meanwhile_opens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = state_mod._connect
    made: list[_RacingConnection] = []

    def racing(path: Path):
        if Path(path).name != "state.db":
            return real(path)
        conn = _RacingConnection(real(path), path)
        made.append(conn)
        return conn

    monkeypatch.setattr(state_mod, "_connect", racing)
    st = State(tmp_path / "data" / "repo")
    assert made and made[0].raced, "the race was not staged"
    fmt = st.db.execute("SELECT value FROM meta WHERE key='format'").fetchone()
    assert fmt == (str(FORMAT_VERSION),)
    st.close()
