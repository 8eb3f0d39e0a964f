"""Never stale, never stuck (issue 22): every ref move reaches the index, ``ask`` catches up
before it answers, hooks that do not depend on the caller's environment, a daemon that
cannot wedge. Real git, real installed hooks, a real daemon process; every wait polls with a
deadline well under the 300 s reconcile, which is what caught these moves before.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gitrag.daemon import client
from tests.daemonutil import gitrag, gitrag_json, wait_for
from tests.gitutil import Repo

CATCH_S = 10.0  # seconds a ref move may take to reach the index (debounce 0.2 s + a small sync)


def _branch_at(path: Path, name: str, commit: str) -> bool:
    """Whether the daemon's index of branch ``name`` is at ``commit``."""
    data = client.request("status", timeout=10.0, repo=str(path))
    return any(b["name"] == name and b["indexed_commit"] == commit for b in data["repos"][0]["branches"])


def _caught(repo: Repo, name: str, commit: str) -> None:
    wait_for(lambda: _branch_at(repo.path, name, commit), f"{name} indexed at {commit[:8]}", deadline_s=CATCH_S)


@pytest.fixture
def installed(repo: Repo, daemon: subprocess.Popen[bytes]) -> Repo:
    """A repository with two commits (the second adds ``gone.py``), hooks installed, indexed
    by a running daemon."""
    repo.write("keep.py", "def kept_function():\n    return 1\n")
    repo.commit("first")
    repo.write("gone.py", "def vanishing_function():\n    return 2\n")
    head = repo.commit("second")
    gitrag("install", "--no-systemd", "--repo", str(repo.path))
    _caught(repo, "main", head)
    return repo


def test_reset_hard_is_an_event(installed: Repo) -> None:
    """Case 1: `git reset --hard HEAD~1` fires no post-* hook; reference-transaction does."""
    installed.git("reset", "-q", "--hard", "HEAD~1")
    _caught(installed, "main", installed.head())
    hits = gitrag_json("ask", "vanishing_function", "--repo", str(installed.path), "--no-answer")
    assert hits["up_to_date"] and "gone.py" not in {r["path"] for r in hits["results"]}


def test_branch_f_and_update_ref_are_events(installed: Repo) -> None:
    """Case 2: a branch moved without being checked out, and HEAD's branch moved by update-ref."""
    first = installed.git("rev-parse", "HEAD~1")
    installed.git("branch", "side")
    _caught(installed, "side", installed.head())
    installed.git("branch", "-f", "side", first)
    _caught(installed, "side", first)
    installed.git("update-ref", "refs/heads/main", first)
    _caught(installed, "main", first)


def test_filter_branch_is_an_event(installed: Repo) -> None:
    """Case 2: filter-branch rewrites the checked-out branch through update-ref."""
    env = {"FILTER_BRANCH_SQUELCH_WARNING": "1"}
    installed.git("filter-branch", "-f", "--index-filter", "git rm -q --cached --ignore-unmatch gone.py", "HEAD",
                  env=env)
    _caught(installed, "main", installed.head())


def test_fetch_into_a_local_branch_is_an_event(installed: Repo, tmp_path: Path) -> None:
    """Case 2: `git fetch URL main:side` moves refs/heads/side; no post-* hook fires."""
    upstream = tmp_path / "upstream"
    subprocess.run(["git", "clone", "-q", str(installed.path), str(upstream)], check=True)
    up = Repo.__new__(Repo)
    up.path = upstream
    up.write("remote.py", "def from_upstream():\n    return 3\n")
    tip = up.commit("upstream work")
    installed.git("fetch", "-q", str(upstream), "main:side")
    _caught(installed, "side", tip)


# -- the reference-transaction script itself (a stub interpreter records each call) --------
def _stubbed(repo: Repo, tmp_path: Path) -> Path:
    from gitrag.git import hooks as install
    from tests.test_hooks import _stub

    stub, log = _stub(tmp_path)
    repo.write("a.py", "x = 1\n")
    repo.commit("first")
    install.install_hooks(install.Target(repo.path / ".git" / "hooks"), python=str(stub))
    return log


def _ref_calls(log: Path) -> list[str]:
    from tests.test_hooks import _calls

    return [c["argv"] for c in _calls(log, every=True) if "reference-transaction" in c["argv"]]


def test_a_commit_amend_or_merge_starts_one_notifier(repo: Repo, tmp_path: Path) -> None:
    """post-commit and post-merge stay quiet when git runs reference-transaction (>= 2.28):
    one Python per move, as before the new hook."""
    from tests.test_hooks import _calls

    log = _stubbed(repo, tmp_path)
    wait_for(lambda: _calls(log, every=True) or True, "")
    before = len(_calls(log, every=True))
    repo.write("b.py", "y = 2\n")
    repo.commit("second")
    repo.git("commit", "-q", "--amend", "-m", "second, amended")
    repo.git("checkout", "-q", "-b", "side", "HEAD~1")
    repo.write("c.py", "z = 3\n")
    repo.commit("side")
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "side", "-m", "merge")
    time.sleep(0.5)  # not an assertion: a stray call would have arrived by now
    hooks = [c["argv"].split()[-2] if c["argv"].endswith("committed") else c["argv"].split()[-4]
             for c in _calls(log, every=True)[before:]]
    assert hooks.count("reference-transaction") == 5  # commit, amend, branch made, commit, merge
    assert hooks.count("post-checkout") == 2 and len(hooks) == 7, hooks


def test_other_refs_start_no_python_and_branches_are_named(repo: Repo, tmp_path: Path) -> None:
    log = _stubbed(repo, tmp_path)
    first = repo.head()
    before = len(_ref_calls(log))
    repo.git("tag", "v1")
    repo.git("update-ref", "refs/remotes/origin/main", first)
    repo.git("update-ref", "refs/notes/x", first)
    repo.git("reset", "-q", "--hard", "HEAD")  # nothing moved
    time.sleep(0.3)  # not an assertion: a stray call would have arrived by now (no event to await)
    assert len(_ref_calls(log)) == before  # tags, remotes, notes, no-op: the shell alone
    repo.git("branch", "-f", "side", first)
    wait_for(lambda: len(_ref_calls(log)) == before + 1, "one call for branch -f")
    call = _ref_calls(log)[-1]
    assert "--branch=side" in call and call.endswith("reference-transaction committed")
    assert f"--git-dir={repo.path / '.git'}" in call
    repo.git("branch", "-D", "side")  # a deletion: nothing to index
    time.sleep(0.3)  # not an assertion: a stray call would have arrived by now (no event to await)
    assert len(_ref_calls(log)) == before + 1


def test_a_foreign_reference_transaction_hook_still_runs_and_can_abort(repo: Repo, tmp_path: Path) -> None:
    from gitrag.git import hooks as install

    seen = tmp_path / "seen.txt"
    hooks = repo.path / ".git" / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    foreign = hooks / "reference-transaction"
    foreign.write_text(f'#!/bin/sh\necho "$1" >> {seen}\ncat >> {seen}\n'
                       '[ "$1" = prepared ] && grep -q refs/heads/forbidden ' f'{seen} && exit 1\nexit 0\n')
    foreign.chmod(0o755)
    log = _stubbed(repo, tmp_path)
    assert (hooks / "reference-transaction.legacy").exists()
    repo.git("branch", "side")
    wait_for(lambda: any("--branch=side" in c for c in _ref_calls(log)), "gitrag's call after the legacy hook")
    text = seen.read_text()
    assert "prepared" in text and "committed" in text and "refs/heads/side" in text  # same argument, same stdin
    assert repo.git("branch", "forbidden", check=False) == "" and "forbidden" not in repo.git("branch")
    install.uninstall_hooks(hooks)
    assert foreign.read_text().startswith("#!/bin/sh\necho") and not (hooks / "reference-transaction.legacy").exists()


def test_doctor_says_how_the_index_stands_to_head(repo: Repo) -> None:
    """Case 1: after a reset the index is ahead of HEAD, not '0 commit(s) behind'."""
    from tests.gitutil import index

    repo.write("a.py", "def one():\n    return 1\n")
    repo.commit("one")
    repo.write("b.py", "def two():\n    return 2\n")
    repo.commit("two")
    index(repo.path)

    def lag() -> str:
        checks = json.loads(gitrag("doctor", "--json", "--repo", str(repo.path), check=False).stdout)["checks"]
        return next(c["detail"] for c in checks if c["name"] == "lag main")

    repo.git("reset", "-q", "--hard", "HEAD~1")
    assert lag().startswith("1 commit(s) ahead of HEAD")
    repo.write("c.py", "def three():\n    return 3\n")
    repo.commit("three")
    assert lag().startswith("on another line of history: HEAD has 1 commit(s) the index lacks, the index 1")
    index(repo.path)
    repo.write("d.py", "def four():\n    return 4\n")
    repo.commit("four")
    assert lag().startswith("1 commit(s) behind")


# -- ask catches up before it answers -------------------------------------------------------
def _ask(repo: Repo, question: str, **env: str) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-m", "gitrag", "ask", question, "--repo", str(repo.path), "--no-answer",
                           "--json", "-k", "5"], capture_output=True, text=True, env={**os.environ, **env},
                          stdin=subprocess.DEVNULL)
    return proc.returncode, (json.loads(proc.stdout) if proc.stdout.strip() else {"stderr": proc.stderr})


def test_ask_right_after_reset_answers_from_head(installed: Repo) -> None:
    installed.git("reset", "-q", "--hard", "HEAD~1")
    code, data = _ask(installed, "vanishing_function")
    assert code == 0 and data["up_to_date"] and data["commit"] == installed.head()
    assert "gone.py" not in {r["path"] for r in data["results"]}


def test_new_branch_commit_and_ask_at_once_is_no_failure(installed: Repo) -> None:
    """Case 3: `git checkout -b x` + commit + an immediate ask: exit 0, the new function found."""
    installed.git("checkout", "-q", "-b", "x")
    installed.write("fresh.py", "def brand_new_function():\n    return 9\n")
    head = installed.commit("new")
    # straight over the socket, before the hook's event is through the debounce
    data = client.request("ask", timeout=30.0, repo=str(installed.path), question="brand_new_function", k=3,
                          no_answer=True)
    assert data["branch"] == "x" and data["commit"] == head and data["results"][0]["symbol"] == "brand_new_function"
    installed.git("checkout", "-q", "-b", "y")
    installed.write("fresh2.py", "def second_new_function():\n    return 10\n")
    head = installed.commit("newer")
    code, data = _ask(installed, "second_new_function")  # the CLI: exit 0, not 1
    assert code == 0, data
    assert data["branch"] == "y" and data["commit"] == head and data["results"][0]["symbol"] == "second_new_function"


def test_ask_catches_up_on_a_move_no_hook_reported(installed: Repo) -> None:
    for hook in (installed.path / ".git" / "hooks").iterdir():
        if not hook.name.endswith(".sample"):
            hook.unlink()  # the daemon hears nothing of what follows
    installed.write("quiet.py", "def unheard_function():\n    return 5\n")
    head = installed.commit("quiet")
    code, data = _ask(installed, "unheard_function")
    assert code == 0 and data["commit"] == head and data["results"][0]["symbol"] == "unheard_function"


def test_past_the_wait_the_answer_says_it_is_behind(installed: Repo) -> None:
    for hook in (installed.path / ".git" / "hooks").iterdir():
        if not hook.name.endswith(".sample"):
            hook.unlink()
    old = installed.head()
    installed.write("late.py", "def late_function():\n    return 6\n")
    installed.commit("late")
    code, data = _ask(installed, "late_function", GITRAG_ASK_WAIT="0")
    assert code == 0 and not data["up_to_date"] and data["commit"] == old
    text = subprocess.run([sys.executable, "-m", "gitrag", "ask", "late_function", "--repo", str(installed.path),
                           "--no-answer"], capture_output=True, text=True, env={**os.environ, "GITRAG_ASK_WAIT": "0"},
                          stdin=subprocess.DEVNULL).stdout
    assert f"answered from the index at {old[:12]}, an older commit than HEAD" in text, text
    code, data = _ask(installed, "late_function", GITRAG_ASK_WAIT="soon")
    assert code != 0 and "GITRAG_ASK_WAIT" in data["stderr"]


# -- hooks that do not depend on the caller's environment, and log what they drop ----------
def _git_env_without(*names: str) -> dict[str, str]:
    from tests.gitutil import GIT_ENV

    return {k: v for k, v in {**os.environ, **GIT_ENV}.items() if k not in names}


def test_a_commit_from_an_environment_without_gitrag_home_is_indexed(installed: Repo) -> None:
    """Case 4: an IDE or cron job lacking the GITRAG_HOME install ran with."""
    installed.write("ide.py", "def from_the_ide():\n    return 7\n")
    env = _git_env_without("GITRAG_HOME")
    subprocess.run(["git", "add", "-A"], cwd=installed.path, env=env, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "from an IDE"], cwd=installed.path, env=env, check=True)
    _caught(installed, "main", installed.head())
    doctor = json.loads(gitrag("doctor", "--json", "--repo", str(installed.path), check=False).stdout)
    assert next(c for c in doctor["checks"] if c["name"] == "events")["status"] == "ok"


def test_a_dropped_event_is_logged_and_doctor_says_why(installed: Repo) -> None:
    """Case 4: an event the notifier drops says why, where doctor reads it."""
    from gitrag.daemon import registry

    registry.remove(GitRepo_common(installed))  # registered no more, hooks still there
    installed.write("lost.py", "def lost_function():\n    return 8\n")
    installed.commit("dropped")
    from gitrag.git import hookenv

    entry = wait_for(lambda: hookenv.drops(), "the drop logged")[-1]
    assert entry["reason"].startswith("not registered") and entry["repo"] == str(installed.path.resolve())
    doctor = json.loads(gitrag("doctor", "--json", "--repo", str(installed.path), check=False).stdout)
    events = next(c for c in doctor["checks"] if c["name"] == "events")
    assert events["status"] == "warn" and "not registered" in events["detail"]


def GitRepo_common(repo: Repo) -> Path:
    from gitrag.git.repo import GitRepo

    return GitRepo(repo.path).common_dir


def test_a_repository_path_with_a_newline(tmp_path: Path, daemon: subprocess.Popen[bytes]) -> None:
    """Case 5: every hook event of such a repository used to be dropped without a word."""
    odd = Repo(tmp_path / "line\nbreak" / "repo")
    odd.write("a.py", "def before_the_break():\n    return 1\n")
    odd.commit("first")
    gitrag("install", "--no-systemd", "--repo", str(odd.path))
    _caught(odd, "main", odd.head())
    odd.write("b.py", "def after_the_break():\n    return 2\n")
    _caught(odd, "main", odd.commit("second"))


# -- a daemon that cannot wedge -----------------------------------------------------------
def test_runtime_folder_removed_under_the_daemon(installed: Repo, daemon: subprocess.Popen[bytes]) -> None:
    """Case 6: logind removes XDG_RUNTIME_DIR at logout; the daemon re-creates its socket
    and lock, stays the only daemon, and commits are still indexed."""
    import shutil

    from gitrag.daemon import protocol

    shutil.rmtree(protocol.socket_path().parent)
    info = wait_for(lambda: client.probe(timeout=0.5)["running"] and client.probe(timeout=0.5), "the socket back")
    assert info["pid"] == daemon.pid
    second = subprocess.run([sys.executable, "-m", "gitrag", "daemon"], capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL)
    assert second.returncode == 1 and f"pid {daemon.pid}" in second.stderr  # one daemon per home
    installed.write("after.py", "def after_logout():\n    return 1\n")
    _caught(installed, "main", installed.commit("after logout"))
    code, data = _ask(installed, "after_logout")
    assert code == 0 and data["results"][0]["symbol"] == "after_logout"


def test_a_stopped_daemon_costs_seconds_and_one_line(installed: Repo, daemon: subprocess.Popen[bytes]) -> None:
    """Case 7: SIGSTOP (a laptop suspended mid-sync): ask used to print nothing for minutes."""
    os.kill(daemon.pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "gitrag", "ask", "kept_function", "--repo", str(installed.path),
                               "--no-answer"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        took = time.monotonic() - t0
        doctor = json.loads(gitrag("doctor", "--json", "--repo", str(installed.path), check=False).stdout)
    finally:
        os.kill(daemon.pid, signal.SIGCONT)
    assert proc.returncode == 1 and took < 20, (took, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "did not answer" in lines[0] and f"kill -CONT {daemon.pid}" in lines[0]
    check = next(c for c in doctor["checks"] if c["name"] == "daemon")
    assert check["status"] == "fail" and "does not answer" in check["detail"]


def test_a_daemon_of_another_build_is_refused_then_replaced_by_install(repo: Repo, tmp_path: Path) -> None:
    """Case 10: an upgrade while the old daemon runs (both say 0.1.0)."""
    import shutil

    from gitrag import build
    from tests.daemonutil import stop_daemon

    repo.write("a.py", "def alpha():\n    return 1\n")
    repo.commit("first")
    old = tmp_path / "old"
    shutil.copytree(Path(build.__file__).parent, old / "gitrag", symlinks=True)
    with (old / "gitrag" / "__init__.py").open("a") as fh:
        fh.write("# the release before\n")
    env = {**os.environ, "PYTHONPATH": str(old)}
    log = open(tmp_path / "old-daemon.log", "ab")  # noqa: SIM115 - closed in the finally below
    proc = subprocess.Popen([sys.executable, "-m", "gitrag", "daemon"], env=env, cwd=old, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=log)
    try:
        wait_for(lambda: client.probe(timeout=0.5)["running"], "the old daemon")
        asked = gitrag("ask", "alpha", "--repo", str(repo.path), "--no-answer", check=False)
        lines = [line for line in asked.stderr.splitlines() if line.strip()]
        assert asked.returncode == 1 and len(lines) == 1 and "is gitrag 0.1.0 (build" in lines[0]
        assert lines[0].count("build") == 2  # both named
        doctor = json.loads(gitrag("doctor", "--json", "--repo", str(repo.path), check=False).stdout)
        assert next(c for c in doctor["checks"] if c["name"] == "daemon")["status"] == "fail"
        gitrag("install", "--no-systemd", "--repo", str(repo.path))
        proc.wait(60)  # install stopped it
        info = client.probe()
        assert info["running"] and info["pid"] != proc.pid and build.same(info)
    finally:
        stop_daemon(proc)
        log.close()


def test_several_in_process_readers_at_once_take_turns(repo: Repo) -> None:
    """Case 8: three `gitrag ask` at once with no daemon: 4-5 of 9 failed 'open in another process'."""
    from tests.gitutil import index

    for i in range(30):
        repo.write(f"m{i}.py", f"def function_{i}(x):\n    return x + {i}\n")
    repo.commit("many")
    index(repo.path)
    for _ in range(3):
        procs = [subprocess.Popen([sys.executable, "-m", "gitrag", "ask", "function_7", "--repo", str(repo.path),
                                   "--no-answer", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  stdin=subprocess.DEVNULL) for _ in range(3)]
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            assert json.loads(out)["results"][0]["symbol"] == "function_7"
            assert "open in another process" not in err


def test_a_held_store_is_a_typed_error(tmp_path: Path) -> None:
    """The 'held' case is a type (StoreHeld), not a message to match."""
    from gitrag.errors import StoreError, StoreHeld
    from gitrag.index.store.edge import EdgeStore

    first, second = EdgeStore(tmp_path / "store"), EdgeStore(tmp_path / "store")
    first.create_collection("c", 4)
    first.count("c")  # its shard open, its lock held
    with pytest.raises(StoreHeld) as info:
        second.count("c")
    assert isinstance(info.value, StoreError)
    first.close()


def test_not_indexed_says_where_the_daemon_looked(repo: Repo, daemon: subprocess.Popen[bytes]) -> None:
    """Case 11 (the daemon's part): a client of another GITRAG_HOME (an MCP server started
    elsewhere) learns which folder and home the daemon looked in."""
    repo.write("a.py", "def alpha():\n    return 1\n")
    repo.commit("first")
    proc = gitrag("ask", "alpha", "--repo", str(repo.path), "--no-answer", check=False)
    assert proc.returncode == 1 and "not indexed" in proc.stderr
    assert f"GITRAG_HOME={os.environ['GITRAG_HOME']}" in proc.stderr and "the daemon looked in" in proc.stderr
    assert "run `gitrag install` (hooks keep it current) or `gitrag index`" in proc.stderr
    # read-only requests through the daemon write nothing for a repository never indexed
    status = json.loads(gitrag("status", "--json", "--repo", str(repo.path)).stdout)
    assert status["daemon"]["running"] and status["repos"][0]["data_dir"] is None
    assert gitrag("related", "a.py:1", "--repo", str(repo.path), check=False).returncode == 1
    assert not (repo.path / ".git" / "gitrag-id").exists()
    assert not list(Path(os.environ["GITRAG_HOME"]).glob("data/*/state.db"))


def test_a_daemon_with_nothing_registered_leaves_once_unused(repo: Repo, daemons) -> None:
    """Case 11 (the stray daemon): a daemon that an MCP server or `ask` started in a home where
    nothing is installed used to stay for good; it now stops once unused for ``--orphan``
    seconds, while a daemon of an installed repository keeps running for its hooks."""
    repo.write("a.py", "def alpha():\n    return 1\n")
    repo.commit("first")
    stray = daemons("--orphan", "1")
    proc = gitrag("ask", "alpha", "--repo", str(repo.path), "--no-answer", check=False)  # a request it answers
    assert proc.returncode == 1 and "not indexed" in proc.stderr
    assert stray.wait(timeout=30) == 0  # stopped by itself, as on SIGTERM
    assert not client.probe(timeout=0.5)["running"]


def test_a_daemon_of_an_installed_repository_does_not_leave(repo: Repo, daemons) -> None:
    repo.write("a.py", "def alpha():\n    return 1\n")
    repo.commit("first")
    kept = daemons("--orphan", "1")
    gitrag("install", "--no-systemd", "--repo", str(repo.path))
    deadline = time.monotonic() + 4  # four times --orphan: the orphan check runs every 0.5 s
    while time.monotonic() < deadline and kept.poll() is None:
        time.sleep(0.1)
    assert kept.poll() is None and client.probe(timeout=2)["running"]


def test_doctor_warns_when_git_runs_no_reference_transaction_hook(repo: Repo, tmp_path: Path) -> None:
    real = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True, check=True).stdout.strip()
    shim = tmp_path / "bin" / "git"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\n[ "$1" = --version ] && {{ echo "git version 2.27.0"; exit 0; }}\nexec {real} "$@"\n')
    shim.chmod(0o755)
    repo.write("a.py", "x = 1\n")
    repo.commit("first")
    env = {**os.environ, "PATH": f"{shim.parent}:{os.environ['PATH']}"}
    proc = subprocess.run([sys.executable, "-m", "gitrag", "doctor", "--json", "--repo", str(repo.path)],
                          capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    check = next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "git")
    assert check["status"] == "warn" and "older than 2.28" in check["detail"] and "reset" in check["detail"]
    from gitrag.git import hooks as install

    assert install.ref_hook_runs()  # the real git here is newer


def test_an_installed_repository_answered_without_its_daemon_says_the_daemon_is_not_running(repo: Repo) -> None:
    """A new user killed the daemon (or it crashed): every later ask said only `run gitrag
    index`. For an installed repository the freshness line now says the daemon is not
    running and how to start it; a repository never installed keeps the plain advice."""
    from gitrag.daemon import registry
    from tests.gitutil import index

    repo.write("a.py", "def alpha():\n    return 1\n")
    repo.commit("first")
    index(repo.path)
    repo.write("b.py", "def beta():\n    return 2\n")
    repo.commit("second")  # no hook installed: the index lags one commit
    plain = gitrag("ask", "alpha", "--repo", str(repo.path), "--no-answer")
    assert "run `gitrag index`" in plain.stdout and "daemon" not in plain.stdout
    registry.add(repo.path / ".git")
    os.environ["GITRAG_AUTOSTART"] = "0"  # a daemon it may not start (see the next test for one it does)
    try:
        told = gitrag("ask", "alpha", "--repo", str(repo.path), "--no-answer")
    finally:
        del os.environ["GITRAG_AUTOSTART"]
    assert "the daemon that keeps it current is not running: `gitrag daemon` starts it" in told.stdout, told.stdout
    assert not client.probe(timeout=1.0)["running"]


def test_ask_in_an_installed_repository_whose_daemon_died_starts_it_again_and_answers_from_head(repo: Repo) -> None:
    """A new user's daemon died (killed here with SIGKILL) and the next commit's event went to
    the spool: ``ask`` starts the daemon again as install did (a background process: no
    systemd user manager here), which catches up, so the answer is from HEAD and finds the new
    code; stderr says what was done. ``gitrag mcp`` starts it the same way (test_mcp)."""
    repo.write("a.py", "def alpha():\n    return 1\n")
    repo.commit("first")
    gitrag("install", "--repo", str(repo.path), "--no-systemd")
    pid = int(client.probe(timeout=2.0)["pid"])
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not client.probe(timeout=0.5)["running"], "the killed daemon to stop answering")
    repo.write("b.py", "def beta_unique_name():\n    return 2\n")
    head = repo.commit("second")  # the hook fires, finds no daemon: the event is spooled
    got = gitrag("ask", "beta_unique_name", "--repo", str(repo.path), "--no-answer")
    assert "the gitrag daemon was not running: started it in the background" in got.stderr, got.stderr
    assert "up to date" in got.stdout and "b.py" in got.stdout, got.stdout
    info = client.probe(timeout=2.0)
    assert info["running"] and info["pid"] != pid
    data = gitrag_json("ask", "beta_unique_name", "--repo", str(repo.path), "--no-answer")
    assert data["commit"] == head and data["up_to_date"], data
    os.kill(int(info["pid"]), signal.SIGKILL)  # and `related` the same way
    wait_for(lambda: not client.probe(timeout=0.5)["running"], "the second daemon to stop answering")
    near = gitrag("related", "b.py:1", "--repo", str(repo.path))
    assert "the gitrag daemon was not running: started it in the background" in near.stderr, near.stderr
    assert client.probe(timeout=2.0)["running"]


def test_a_stopped_daemon_is_named_by_doctor_and_stopped_by_daemon_stop(
        installed: Repo, daemon: subprocess.Popen[bytes]) -> None:
    """SIGSTOP'd: it holds the socket and accepts, but never answers. `doctor` names its pid and
    the two ways out; `gitrag daemon --stop` still stops it (SIGTERM + SIGCONT, then SIGKILL)."""
    os.kill(daemon.pid, signal.SIGSTOP)
    try:
        doctor = gitrag("doctor", "--repo", str(installed.path), check=False)
        stop = gitrag("daemon", "--stop", check=False)
    finally:
        if daemon.poll() is None:
            os.kill(daemon.pid, signal.SIGCONT)
    row = next(line for line in doctor.stdout.splitlines() if line.startswith("FAIL daemon"))
    assert f"the daemon (pid {daemon.pid}) at " in row and "does not answer" in row, row
    assert f"`kill -CONT {daemon.pid}`" in row and "`gitrag daemon --stop`: SIGTERM, then SIGKILL" in row, row
    assert stop.returncode == 0, stop.stderr
    assert stop.stderr.splitlines() == [
        f"the gitrag daemon (pid {daemon.pid}) does not answer (stopped or suspended?): sending SIGTERM",
        f"stopped the gitrag daemon (pid {daemon.pid}) with SIGTERM"], stop.stderr
    assert daemon.wait(timeout=30) == 0  # it stopped as on `--stop`: exit 0, not killed
    assert not client.probe(timeout=0.5)["running"]
