"""A first index on every core (gitrag.index.pool, issue 21) gives exactly the index of a run
in one process: the same points (ids, payloads, vectors), manifest, symbol graph, cache and
summary, with files the policy skips by path, by size and by content among them."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from gitrag import config
from gitrag.git.repo import GitRepo
from gitrag.index import pool as index_pool
from gitrag.index.indexer import Indexer
from gitrag.index.workspace import open_workspace
from tests.gitutil import Repo
from tests.reliability import points, scratch_home


def _project(repo: Repo) -> None:
    for i in range(40):
        body = "".join(f"def handler_{i}_{j}(request, n={j}):\n    \"\"\"Handle request {j} of module {i}.\"\"\"\n"
                       f"    total = sum(range(n))\n    return request.respond(total + {i})\n\n\n" for j in range(6))
        repo.write(f"pkg/mod{i:02}.py", f"import os\n\n\nclass Service{i}:\n    name = 'svc{i}'\n\n\n" + body)
        repo.write(f"docs/page{i:02}.md", f"# Page {i}\n\nHow service {i} answers requests.\n\n## Details\n\n"
                   + "Text of the page. " * 30 + "\n")
    repo.write("pkg/same_a.py", "def twin():\n    return 2\n")
    repo.write("pkg/same_b.py", "def twin():\n    return 2\n")  # one blob, two paths
    repo.write("node_modules/lib/index.js", "module.exports = function f() { return 1; };\n")  # by path
    repo.write("web/app.min.js", "var a=1;" * 50 + "\n")  # by name
    repo.write("web/bundle.js", "var x=" + "1+" * 400 + "1;\n")  # by content: minified
    repo.write("logo.png", b"\x89PNG\r\n\x1a\n\x00\x00binary")  # by content: binary
    repo.write("big.txt", "x" * 3000 + "\n")  # by size (GITRAG_MAX_FILE_BYTES below)
    repo.write("empty.py", "")
    repo.write(".gitragignore", "ignored/\n")
    repo.write("ignored/secret.py", "def hidden():\n    return 0\n")
    repo.commit("a project")


def _index(repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, workers: int) -> dict[str, Any]:
    monkeypatch.setenv("GITRAG_INDEX_WORKERS", str(workers))
    with scratch_home(tmp_path, monkeypatch, name):
        with open_workspace(repo.path) as ws:
            summary = Indexer(ws).sync().to_json()
            cache = ws.state.cache.path
        stored, manifest = points(repo.path)
        state = config.repo_data_dir(GitRepo(repo.path).common_dir) / "state.db"
        with sqlite3.connect(state) as db:
            graphs = sorted(db.execute("SELECT blob, variant, data FROM symbols"))
            names = sorted(db.execute("SELECT * FROM symbol_names"))
        with sqlite3.connect(cache) as db:
            vectors = sorted(db.execute("SELECT key, f.name, digest, vec FROM vectors JOIN fingerprints f ON f.id = fp"))
            sparse = sorted(db.execute("SELECT key, version, digest, data FROM sparse"))
    summary.pop("seconds")
    return {"summary": summary, "stored": stored, "manifest": manifest, "graphs": graphs, "names": names,
            "vectors": vectors, "sparse": sparse}


@pytest.mark.parametrize("embedder", ["hash", "static"])
def test_the_pool_indexes_exactly_as_one_process(repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  embedder: str) -> None:
    monkeypatch.setenv("GITRAG_EMBEDDER", embedder)
    monkeypatch.setenv("GITRAG_MAX_FILE_BYTES", "2000")
    monkeypatch.setattr(index_pool, "POOL_MIN_FILES", 1)
    monkeypatch.setattr(index_pool, "AHEAD", 2)
    monkeypatch.setattr("gitrag.index.indexer.BATCH_FILES", 16)  # several batches, the pool feeding across them
    _project(repo)
    started: list[int] = []
    real_init = index_pool.Pool.__init__

    def counting(self: index_pool.Pool, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        started.append(self.size)

    monkeypatch.setattr(index_pool.Pool, "__init__", counting)
    one = _index(repo, tmp_path, monkeypatch, "home-one", 1)
    assert started == []
    pooled = _index(repo, tmp_path, monkeypatch, "home-pool", 2)
    assert started == [2]
    assert one["summary"]["files_skipped"] == 6 and one["summary"]["chunks_embedded"] > 200
    for part in one:
        assert pooled[part] == one[part], part


def test_a_broken_pool_falls_back_to_this_process(repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_pool, "POOL_MIN_FILES", 1)
    _project(repo)
    one = _index(repo, tmp_path, monkeypatch, "home-one", 1)

    monkeypatch.setattr(index_pool.Pool, "results", lambda self, works: (
        (w, self._pool.submit(_die, w)) for w in works))
    pooled = _index(repo, tmp_path, monkeypatch, "home-pool", 2)
    for part in one:
        assert pooled[part] == one[part], part


def _die(work: index_pool.FileWork) -> index_pool.FileResult:
    """A worker task that kills its worker (BrokenProcessPool in the sync)."""
    import os

    os._exit(3)


def test_a_sync_of_many_batches_optimizes_the_store_once(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each batch flushes; the optimizer (vacuum, merge, HNSW: a rewrite of the collection's
    segments) runs once, after the last batch, not once per batch."""
    from gitrag.index.store.edge import EdgeStore

    monkeypatch.setattr("gitrag.index.indexer.BATCH_FILES", 8)
    _project(repo)
    calls: list[str] = []
    for name in ("flush", "optimize"):
        real = getattr(EdgeStore, name)
        monkeypatch.setattr(EdgeStore, name, lambda self, coll, _real=real, _name=name: (calls.append(_name),
                                                                                         _real(self, coll))[1])
    with open_workspace(repo.path) as ws:
        Indexer(ws).sync()
        assert calls.count("optimize") == 1 and calls[-1] == "optimize"
        assert calls.count("flush") >= 10  # one per batch: durable before each batch's manifest commits
        calls.clear()
        repo.write("pkg/mod00.py", "def changed():\n    return 1\n")
        repo.commit("one file")
        Indexer(ws).sync()
        assert calls == ["flush"]  # a few points of ~400: left for later (gitrag.index.views.settle)


def _children(pid: int) -> dict[int, str]:
    """The live (not zombie) processes whose parent is ``pid``: {pid: command line}."""
    out: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == pid and state != "Z":
            out[int(entry.name)] = cmd
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
def test_killing_the_index_takes_its_workers_with_it(repo: Repo, tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import threading
    import time

    for i in range(index_pool.POOL_MIN_FILES + 200):  # enough paths for the pool
        repo.write(f"pkg/m{i:04}.py", "".join(f"def f_{i}_{j}(x):\n    return x + {j}\n\n\n" for j in range(20)))
    repo.commit("many files")
    env = {**os.environ, "GITRAG_INDEX_WORKERS": "2", "GITRAG_EMBEDDER": "hash"}
    proc = subprocess.Popen([sys.executable, "-m", "gitrag", "index", "--repo", str(repo.path)], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ended: list[str] = []
    helpers: dict[int, str] = {}
    readers = [threading.Thread(target=lambda s=s, n=n: (s.read(), ended.append(n)), daemon=True)
               for n, s in (("stdout", proc.stdout), ("stderr", proc.stderr))]
    for t in readers:
        t.start()
    try:
        deadline = time.monotonic() + 120
        workers: dict[int, str] = {}
        while time.monotonic() < deadline and proc.poll() is None:
            workers = {p: c for p, c in _children(proc.pid).items() if "spawn_main" in c}
            if len(workers) >= 2:
                break
            time.sleep(0.05)
        assert len(workers) >= 2, "the pool's workers never started"
        helpers.update({**_children(proc.pid), **workers})  # the workers and multiprocessing's resource tracker
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(p) for p in helpers):
            time.sleep(0.05)
        left = {p: c for p, c in helpers.items() if _alive(p)}
        assert not left, f"still running after their parent was killed: {left}"
        for t in readers:
            t.join(max(0.0, deadline - time.monotonic()))
        assert sorted(ended) == ["stderr", "stdout"], "a worker kept the command's output open"
    finally:  # the old code's strays, and all of it when the test failed early
        if proc.poll() is None:
            proc.kill()
        for p in {**helpers, **_children(proc.pid)}:
            if _alive(p):
                os.kill(p, signal.SIGKILL)


_ORPHAN = """
import os, sys, time
sys.platform = "elsewhere"  # no PR_SET_PDEATHSIG: the portable watch alone
from gitrag.index.pool import _die_with_parent
_die_with_parent(os.getppid())
print("ready", flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
def test_without_pdeathsig_a_worker_still_sees_its_parent_die(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    ready = tmp_path / "ready"
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time\n"
                               f"c = subprocess.Popen([sys.executable, '-c', {_ORPHAN!r}], stdout=open({str(ready)!r}, 'w'))\n"
                               "print(c.pid, flush=True)\ntime.sleep(120)\n"], stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "ready" not in (ready.read_text() if ready.exists() else ""):
            time.sleep(0.05)
        assert _alive(child) and "ready" in ready.read_text()
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 2 + 4 * index_pool.PARENT_POLL_S
        while time.monotonic() < deadline and _alive(child):
            time.sleep(0.05)
        assert not _alive(child), "the worker outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)
