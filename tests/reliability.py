"""Helpers for the reliability tests (issue 8).

* :func:`points` reads what a branch really holds: every point of its view of the shared
  collection (payload and dense vector; a wrong ``branches`` membership or an orphan
  point counts as wrong) and the manifest; :func:`compare` counts points *lost* (in the from-scratch
  index, missing here) and *wrong* (here but not there, or with another payload or vector,
  or store and manifest disagreeing) against a from-scratch index of the same commit.
* :func:`record` appends each fault tried, its outcome and those counts to the JSON-lines
  file named by ``RELIABILITY_LOG`` (if set); ``tests/reliability_report.py`` turns the
  records into the table in RELIABILITY.md.
* :func:`run` / :func:`spawn` start real ``gitrag`` processes, optionally with faults
  from :mod:`tests.prelude`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from gitrag.index.state import State
from gitrag.index.workspace import open_workspace
from tests.daemonutil import wait_for
from tests.gitutil import Repo
from tests.gitutil import index as sync
from tests.prelude import ENV as PRELUDE_ENV

ROOT = Path(__file__).resolve().parent.parent
LOG_ENV = "RELIABILITY_LOG"
Points = dict[str, tuple[str, tuple[float, ...]]]  # point id -> (payload JSON, dense vector rounded)


def functions(prefix: str, n: int) -> str:
    """``n`` Python functions, each big enough to be a chunk of its own."""
    return "\n\n".join(
        f"def {prefix}_{i}(value, other):\n    \"\"\"Compute step {i} of {prefix} from value and other.\"\"\"\n"
        f"    total = value * {i} + other\n    for item in range({i}):\n        total += item * other - value\n"
        f"    return total\n" for i in range(n))


def commit_a(repo: Repo) -> str:
    repo.write("pkg/a.py", functions("alpha", 6))
    repo.write("pkg/b.py", functions("beta", 4))
    repo.write("pkg/c.py", functions("gamma", 3))
    return repo.commit("A")


def commit_b(repo: Repo) -> str:
    """After commit_a: edits, an insertion that shifts lines (payload updates), a deleted file,
    a rename and new files, so a sync does every kind of store write."""
    repo.write("pkg/a.py", "import os\n\n\n" + functions("alpha", 6).replace("value * 3 +", "value * 33 +"))
    repo.git("rm", "-q", "pkg/b.py")
    repo.git("mv", "pkg/c.py", "pkg/c_renamed.py")
    for k in range(4):
        repo.write(f"pkg/new_{k}.py", functions(f"new{k}", 5))
    return repo.commit("B")


def _read(ws: Any, collection: str, ids: list[str]) -> list[tuple[str, dict[str, Any], list[float]]]:
    """(id, payload, dense vector) of stored points, from either backend's engine."""
    out = []
    for i in range(0, len(ids), 512):
        part = ids[i : i + 512]
        if ws.store.kind == "embedded":
            recs = ws.store._shard(collection).retrieve(part, True, True)
            out += [(str(r.id), dict(r.payload), list(r.vector["dense"])) for r in recs]
        else:
            recs = ws.store._client.retrieve(collection, ids=part, with_payload=True, with_vectors=True)
            out += [(str(r.id), dict(r.payload), list(r.vector["dense"])) for r in recs]
    return out


def _store_points(ws: Any, branch: Any) -> Points:
    """The branch's view of the shared collection, payloads without ``branches``. A point
    whose ``branches`` disagree with the state's manifests (of every branch) gets a marked
    payload, and points no branch holds are included: both count as wrong."""
    from gitrag.index.views import expected

    collection = branch.collection
    members = expected(ws, branch.fingerprint)
    view = ws.store.ids(collection, branch=branch.view)
    stored = _read(ws, collection, sorted(ws.store.ids(collection)))
    out: Points = {}
    for pid, payload, vector in stored:
        got = (tuple(payload.pop("branches", ())), tuple(payload.pop("hidden", ())))
        payload.pop("digest", None)  # the store's checks (gitrag.index.integrity), not in the manifest
        payload.pop("vsig", None)
        want = members.get(pid)
        if want is None:  # held by no branch: an orphan
            out[pid] = ("orphan " + json.dumps(payload, sort_keys=True), ())
            continue
        if pid not in view:
            continue
        text = json.dumps(payload, sort_keys=True)
        if got != want:
            text = "wrong branches " + text
        out[pid] = (text, tuple(round(float(x), 4) for x in vector))
    return out


def points(path: Path) -> tuple[Points, dict[str, str]]:
    """(store points, manifest {id: payload JSON}) of the current branch; empty if not indexed."""
    ws = open_workspace(path)
    try:
        branch = ws.state.branch(ws.repo.branch())
        if branch is None:
            return {}, {}
        keep = ws.store.payload_fields  # the fields the store keeps of each row's payload (None: all)
        manifest = {r.point_id: json.dumps(r.payload if keep is None else {k: v for k, v in r.payload.items() if k in keep},
                                           sort_keys=True) for r in ws.state.points(branch.name)}
        stored = _store_points(ws, branch) if ws.store.has_collection(branch.collection) else {}
        return stored, manifest
    finally:
        ws.close()


def compare(got: tuple[Points, dict[str, str]], want: tuple[Points, dict[str, str]],
            atol: float = 2e-4) -> tuple[int, int]:
    """(lost, wrong) of ``got`` against the from-scratch ``want`` (see the module doc); vector
    values agree to ``atol`` (a vector quantised from another rounding of the same embedding,
    e.g. an upgraded cache's, may be a quantisation step away: pass that step)."""
    store, manifest = got
    truth = want[0]
    lost = len(truth.keys() - store.keys())
    wrong = len(store.keys() - truth.keys())
    wrong += sum(1 for pid in store.keys() & truth.keys() if not _same(store[pid], truth[pid], atol))
    wrong += sum(1 for pid in store.keys() | manifest.keys() if manifest.get(pid) != store.get(pid, ("",))[0])
    return lost, wrong


def _same(a: tuple[str, tuple[float, ...]], b: tuple[str, tuple[float, ...]], atol: float = 2e-4) -> bool:
    return a[0] == b[0] and len(a[1]) == len(b[1]) and all(abs(x - y) <= atol for x, y in zip(a[1], b[1]))


@contextmanager
def scratch_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str = "scratch-home") -> Iterator[Path]:
    """Run the block with GITRAG_HOME pointing at a fresh folder, then restore it."""
    old = os.environ["GITRAG_HOME"]
    home = tmp_path / name
    monkeypatch.setenv("GITRAG_HOME", str(home))
    try:
        yield home
    finally:
        monkeypatch.setenv("GITRAG_HOME", old)


@contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``2m``, ``256m``) mounted at ``folder`` for the block (needs root,
    as in CI); the test is skipped with the reason elsewhere."""
    folder.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(folder)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip() or proc.returncode}): run as root")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> None:
    """Take every free byte of the file system holding ``folder`` (a file ``ballast`` in it)."""
    st = os.statvfs(folder)
    with open(folder / "ballast", "wb") as fh:
        os.posix_fallocate(fh.fileno(), 0, st.f_bavail * st.f_frsize)


def fresh(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Points, dict[str, str]]:
    """What a from-scratch index of the same commit holds (made in another GITRAG_HOME)."""
    with scratch_home(tmp_path, monkeypatch, f"scratch-{len(list(tmp_path.glob('scratch-*')))}"):
        sync(path)
        return points(path)


def lost_wrong(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """Points lost and wrong in ``path``'s index against a from-scratch index of HEAD."""
    return compare(points(path), fresh(path, tmp_path, monkeypatch))


def indexed_commit(path: Path) -> str | None:
    """The current branch's last indexed commit, read from the state file directly."""
    from gitrag import config
    from gitrag.git.repo import GitRepo

    repo = GitRepo(path)
    state = State(config.repo_data_dir(repo.common_dir))
    try:
        branch = state.branch(repo.branch())
        return branch.indexed_commit if branch else None
    finally:
        state.close()


def record(fault: str, outcome: str, lost: int | None = None, wrong: int | None = None, group: str = "") -> None:
    """Note one fault tried (for RELIABILITY.md); the counts are what the test asserted."""
    target = os.environ.get(LOG_ENV)
    if not target:
        return
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
    line = {"group": group, "fault": fault, "outcome": outcome, "lost": lost, "wrong": wrong, "test": test}
    with open(target, "a") as fh:
        fh.write(json.dumps(line, ensure_ascii=False) + "\n")


# -- processes -----------------------------------------------------------------------------


def _command(prelude: dict[str, Any] | None) -> list[str]:
    if prelude is None:
        return [sys.executable, "-m", "gitrag"]
    return [sys.executable, "-c", "import tests.prelude as p; p.main()"]


def _env(prelude: dict[str, Any] | None, extra: dict[str, str] | None) -> dict[str, str]:
    env = {**os.environ, **(extra or {})}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if prelude is not None:
        env[PRELUDE_ENV] = json.dumps(prelude)
    return env


def run(*args: str, prelude: dict[str, Any] | None = None, env: dict[str, str] | None = None,
        cwd: Path | None = None, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run gitrag ARGS to the end (a TimeoutExpired is a hang: the test fails)."""
    return subprocess.run([*_command(prelude), *args], cwd=cwd, env=_env(prelude, env), capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=timeout, check=False)


def spawn(*args: str, prelude: dict[str, Any] | None = None, env: dict[str, str] | None = None,
          log: Path | None = None) -> subprocess.Popen[bytes]:
    """Start gitrag ARGS in the background (stdout and stderr to ``log``, default: discarded)."""
    out: Any = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - closed with the process
    return subprocess.Popen([*_command(prelude), *args], env=_env(prelude, env), stdin=subprocess.DEVNULL,
                            stdout=out, stderr=out)


def start_daemon(prelude: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """A real daemon (optionally with faults) answering on the socket when this returns."""
    from gitrag.daemon import client

    log = Path(os.environ["GITRAG_HOME"] + "-daemon.log")
    proc = spawn("daemon", "--debounce", "0.2", prelude=prelude, env=env, log=log)
    wait_for(lambda: client.probe(timeout=0.5)["running"] or proc.poll() is not None, "the daemon to answer")
    if proc.poll() is not None:
        raise AssertionError(f"the daemon exited with {proc.returncode}: {log.read_text()[-2000:]}")
    return proc


def pending_repo(repo: Repo) -> Repo:
    """Commit A indexed (in-process) on main, and branch ``side`` (A plus an edit of
    pkg/c.py) indexed too; then commit B on main, touching every kind of store write, not
    yet indexed: new points, points only main held (deleted) and points side shares
    (membership updates)."""
    commit_a(repo)
    sync(repo.path)
    repo.git("checkout", "-q", "-b", "side")
    repo.write("pkg/c.py", functions("gamma", 3).replace("value * 1 +", "value * 11 +"))
    repo.commit("side edits c")
    sync(repo.path)
    repo.git("checkout", "-q", "main")
    commit_b(repo)
    return repo
