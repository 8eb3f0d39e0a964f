"""Queries whose cost does not grow with the repository (issue 21).

- The symbol graph is read by key: ``find_definitions`` and ``file_outline`` read the
  state's ``symbol_names`` rows (and one file's graph), never the whole branch's graph,
  and give exactly what the whole-graph :class:`SymbolIndex` gives; a state written
  before the table existed is converted on open (nothing re-chunked or re-embedded).
- ``gitrag ask`` through a real daemon imports none of the in-process search stack, nor click
  (the quick parse, gitrag.surfaces.args) nor OpenSSL's hashlib.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gitrag.index import symbols
from gitrag.index.indexer import Indexer
from gitrag.index.symbols import SymbolIndex, file_outline, find_definitions
from gitrag.index.workspace import Workspace, open_workspace
from tests.daemonutil import wait_for
from tests.gitutil import Repo
from tests.test_symbols import GRAPHS, _write_files, inject_graphs

#: every spelling the ranking and the MCP tools ask for: exact, suffix, other separators,
#: other case (the case-insensitive tier), unknown
NAMES = ["_fmt", "Greeter.greet", "Greeter", "greet.inner", "Parser.parse", "Parser::parse", "greeter.GREET",
         "GREETER", "helper", "describe", "Base.describe", "inner", "nothing_like_this", "LoudGreeter._FMT", "parse"]


@pytest.fixture
def ws(repo: Repo) -> Workspace:
    _write_files(repo)
    repo.commit("graph")
    w = open_workspace(repo.path)
    Indexer(w).sync()
    inject_graphs(w)
    yield w
    w.close()


def _whole(ws: Workspace) -> SymbolIndex:
    index = symbols._load(ws, ws.repo.branch())
    symbols.clear_cache()
    return index


def test_definitions_are_read_by_key_and_equal_the_whole_graph(ws: Workspace) -> None:
    whole = _whole(ws)
    for name in NAMES:
        for path in (None, "app/loud.py", "app/greeter.py"):
            assert find_definitions(ws, name, path) == whole.find(name, path), (name, path)
    for path in GRAPHS:
        assert file_outline(ws, path) == whole.by_path[path]
    assert file_outline(ws, "README.md") == []
    with pytest.raises(symbols.NotFound):
        file_outline(ws, "app/missing.py")
    assert symbols.branch_paths(ws) == whole.paths
    assert not symbols._cache, "the whole graph was loaded for a lookup by key"


def test_lookups_read_only_the_asked_name(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[list[str]] = []
    real = ws.state.definitions_named

    def spy(branch: str, keys: list[str], variant: str) -> list[tuple[object, ...]]:
        asked.append(list(keys))
        rows = real(branch, keys, variant)
        assert {r[1].rsplit(".", 1)[-1].rsplit("::", 1)[-1].lower() for r in rows} <= set(keys)
        return rows

    monkeypatch.setattr(ws.state, "definitions_named", spy)
    assert [d.name for d in find_definitions(ws, "Greeter._fmt")] == ["Greeter._fmt"]
    assert [d.name for d in find_definitions(ws, "_fmt")] == ["Greeter._fmt", "LoudGreeter._fmt"]  # cached by key
    assert asked == [["_fmt"]]


def test_a_graph_written_by_the_old_state_is_converted_on_open(repo: Repo) -> None:
    _write_files(repo)
    repo.commit("graph")
    with open_workspace(repo.path) as w:
        Indexer(w).sync()
        inject_graphs(w)
        whole = _whole(w)
        path = w.state.path
    db = sqlite3.connect(path)  # what the previous release left: graphs, no symbol_names table
    db.execute("DROP TABLE symbol_names")
    db.execute("DELETE FROM meta WHERE key='symbol_names'")
    db.commit()
    db.close()
    with open_workspace(repo.path) as w:
        symbols.clear_cache()
        for name in NAMES:
            assert find_definitions(w, name) == whole.find(name), name
        assert not symbols._cache
        rows = w.state.db.execute("SELECT count(*) FROM symbol_names").fetchone()[0]
        assert rows == sum(len(g["definitions"]) for g in GRAPHS.values())


def test_a_reindexed_blob_replaces_its_names(ws: Workspace, repo: Repo) -> None:
    repo.write("app/base.py", "def renamed():\n    return 1\n")
    repo.commit("rename helper")
    Indexer(ws).sync()
    symbols.clear_cache()
    assert find_definitions(ws, "helper") == []  # the old blob is not in the branch any more
    assert [d.name for d in find_definitions(ws, "renamed")] == ["renamed"]


_PROBE = """
import atexit, sys
heavy = ("asyncio", "click", "hashlib", "numpy", "rich", "structlog", "pygit2", "qdrant_edge", "gitrag.index.store", "gitrag.query.ranking", "gitrag.query.retrieval",
         "gitrag.index.workspace", "gitrag.index.symbols", "gitrag.index.sparse")
atexit.register(lambda: print(json.dumps(sorted(m for m in heavy if m in sys.modules)), file=sys.stderr))
import json
from gitrag.surfaces.entry import main
main()
"""


def test_ask_through_the_daemon_imports_no_search_stack(repo: Repo, daemon: subprocess.Popen[bytes]) -> None:
    repo.write("billing.py", "def invoice_total(items):\n    return sum(i.price for i in items)\n")
    repo.commit("code")
    subprocess.run([sys.executable, "-m", "gitrag", "index", "--repo", str(repo.path)], check=True,
                   capture_output=True)
    for extra in ([], ["--json"], ["--files"]):
        proc = subprocess.run([sys.executable, "-c", _PROBE, "ask", "invoice total", "--no-answer",
                               "--repo", str(repo.path), *extra], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
        assert "billing.py" in proc.stdout
        assert json.loads(proc.stderr.strip().splitlines()[-1]) == [], extra


def test_a_commit_not_indexed_yet_is_marked_by_the_daemon_not_by_the_client(
        repo: Repo, daemon: subprocess.Popen[bytes]) -> None:
    """Whether a work-tree result is HEAD's code not indexed yet is decided where it was searched
    (the daemon): the client reads ``in_head`` and loads no git bindings for the label."""
    import os

    repo.write("billing.py", "def invoice_total(items):\n    return sum(i.price for i in items)\n")
    repo.commit("code")
    subprocess.run([sys.executable, "-m", "gitrag", "index", "--repo", str(repo.path)], check=True,
                   capture_output=True)
    repo.write("refunds.py", "def refund_total(items):\n    return sum(i.refund for i in items)\n")
    repo.commit("refunds")  # not indexed: with no wait the daemon answers from the index it has
    env = os.environ | {"GITRAG_ASK_WAIT": "0"}
    ask = [sys.executable, "-c", _PROBE, "ask", "refund total", "--no-answer", "-k", "1", "--repo", str(repo.path)]

    def warmed() -> bool | None:  # the first ask is over its wait at once; the daemon's warm-up embeds the file
        data = json.loads(subprocess.run([*ask, "--json"], capture_output=True, text=True, check=True, env=env).stdout)
        return data["worktree"]["late"] == 0 or None

    wait_for(warmed, "the daemon's warm-up to embed the commit not indexed yet")
    proc = subprocess.run(ask, capture_output=True, text=True, check=False, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].endswith("[in HEAD, not indexed yet]"), proc.stdout
    assert json.loads(proc.stderr.strip().splitlines()[-1]) == []
    data = json.loads(subprocess.run([*ask, "--json"], capture_output=True, text=True, check=True, env=env).stdout)
    assert [(r["path"], r["source"], r["in_head"]) for r in data["results"]] == [("refunds.py", "worktree", True)]
    assert data["worktree"]["in_head"] == 1 and data["up_to_date"] is False


def test_the_work_tree_is_found_as_git_finds_it(repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gitrag.daemon.routing import workdir
    from gitrag.errors import NotARepository
    from gitrag.git.repo import GitRepo

    repo.write("pkg/mod.py", "x = 1\n")
    repo.commit("one")
    linked = tmp_path / "linked"
    repo.git("worktree", "add", "-q", str(linked))
    for where in (repo.path, repo.path / "pkg", linked, linked / "pkg"):
        assert workdir(str(where)) == GitRepo(where).workdir
    with pytest.raises(NotARepository):
        workdir(str(tmp_path / "nowhere"))
    outside = tmp_path / "plain"
    outside.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    with pytest.raises(NotARepository):
        workdir(str(outside))


def test_structlog_is_configured_when_first_imported() -> None:
    """The CLI defers structlog's set-up to its first import: a log line must still go to
    stderr at the CLI's level, never to stdout (which carries --json)."""
    code = ("import sys\nfrom gitrag import logs\nlogs.configure_when_used('warning')\n"
            "assert 'structlog' not in sys.modules\n"
            "import structlog\nstructlog.get_logger('t').warning('kept', n=1)\nstructlog.get_logger('t').info('dropped')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert "kept" in proc.stderr and "n=1" in proc.stderr and "dropped" not in proc.stderr


def test_candidate_payloads_come_from_the_state_not_the_store(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ranked candidates' payloads are the manifest rows (primary-key lookups), not a
    retrieve from the store: the same results, and the store is never asked for them."""
    from gitrag.query.retrieval import search

    before = [(r.point_id, r.path, r.start_line, r.score) for r in search(ws, "greet the user with helper")]
    assert before

    def refuse(*_args: object) -> None:
        raise AssertionError("payloads were read from the store")

    monkeypatch.setattr(ws.store, "payloads", refuse)
    after = [(r.point_id, r.path, r.start_line, r.score) for r in search(ws, "greet the user with helper")]
    assert after == before
    from gitrag.index.sparse import query_vector

    stored = ws.store.search(ws.state.branch(ws.repo.branch()).collection, dense=None,
                             sparse=query_vector("greet helper"), limit=50, branch=None)
    rows = ws.state.payloads([h.id for h in stored] + ["no-such-point"])
    assert set(rows) == {h.id for h in stored}
    for h in stored:  # the store's payload is the row's plus the membership fields
        assert {k: v for k, v in h.payload.items() if k not in ("branches", "hidden")} == rows[h.id]
