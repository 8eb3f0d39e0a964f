"""A branch whose name is not valid UTF-8: every command refuses it in one line (exit 1), the
daemon skips it quietly, and the repository's other branches and work trees keep working."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.gitutil import Repo

BAD = os.fsdecode(b"bad\xffname")  # git stores the bytes; a str spells them with a surrogate escape
REFUSAL = "gitrag: error: branch name is not valid UTF-8: gitrag does not index it; "


def _gitrag(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gitrag", *args], cwd=cwd, capture_output=True, text=True,
                          errors="replace", timeout=300, stdin=subprocess.DEVNULL)


def _project(repo: Repo) -> Repo:
    repo.write("util/strings.py", "def slugify(text):\n    return '-'.join(text.lower().split())\n")
    repo.commit("one")
    return repo


def _assert_refused(repo: Repo) -> None:
    for command in (["index"], ["ask", "slugify"], ["status"], ["status", "--json"], ["index", "--json"]):
        done = _gitrag(*command, cwd=repo.path)
        err = done.stderr.strip()
        assert done.returncode == 1, (command, err)
        assert len(err.splitlines()) == 1 and err.startswith(REFUSAL), (command, err)
        assert "bad\\xffname" in err and done.stdout == "", (command, err, done.stdout)


def test_a_branch_name_that_is_not_utf8_is_refused_in_one_line(repo: Repo) -> None:
    project = _project(repo)
    project.git("checkout", "-q", "-b", BAD)
    _assert_refused(project)
    project.git("checkout", "-q", "main")  # the other branches are indexed as ever
    assert json.loads(_gitrag("index", "--json", cwd=project.path).stdout)["branch"] == "main"
    assert _gitrag("gc", cwd=project.path).returncode == 0


def test_the_daemon_refuses_it_quietly_and_keeps_serving_the_rest(repo: Repo, tmp_path: Path, daemon: object) -> None:
    project = _project(repo)
    other = _project(Repo(tmp_path / "other"))
    for tree in (project, other):
        assert _gitrag("index", cwd=tree.path).returncode == 0
    install = _gitrag("install", "--no-systemd", "--repo", str(project.path), cwd=project.path)
    assert install.returncode == 0, install.stderr
    assert _gitrag("ask", "slugify", cwd=project.path).returncode == 0  # the daemon now warms this work tree
    project.git("checkout", "-q", "-b", BAD)
    project.write("util/more.py", "def more():\n    return 2\n")
    project.commit("a commit on it: the hooks fire")
    time.sleep(2.5)  # five warming rounds, and the commit's sync
    _assert_refused(project)
    asked = _gitrag("ask", "slugify", "--json", cwd=other.path)
    assert asked.returncode == 0 and json.loads(asked.stdout)["results"], asked.stderr
    status = _gitrag("status", "--json", cwd=other.path)
    assert status.returncode == 0, status.stderr
    log = Path(os.environ["GITRAG_HOME"] + "-daemon.log").read_text(errors="replace")
    assert "surrogates not allowed" not in log and "Unhandled exception" not in log
    assert "warming the work-tree overlay failed" not in log and "sync failed" not in log and "crash" not in log
    assert log.count("not warming the work-tree overlay") <= 1
    project.git("checkout", "-q", "main")
    assert _gitrag("ask", "slugify", cwd=project.path).returncode == 0


def test_a_work_tree_on_such_a_branch_is_never_behind(repo: Repo, tmp_path: Path) -> None:
    """The daemon's reconcile asks every work tree of a repository: one on such a branch is
    skipped (not indexed), not an error that hides the others."""
    from gitrag import config
    from gitrag.daemon import gc
    from gitrag.git.repo import GitRepo
    from gitrag.index.state import State

    project = _project(repo)
    assert _gitrag("index", cwd=project.path).returncode == 0
    linked = tmp_path / "linked"
    project.git("worktree", "add", "-q", "-b", BAD, str(linked))
    project.commit("main moves on")
    state = State(config.repo_data_dir(GitRepo(project.path).common_dir))
    try:
        assert gc.stale(GitRepo(linked), state) is False
        assert gc.stale(GitRepo(project.path), state) is True
    finally:
        state.close()
    assert GitRepo(linked).checked_out() is None and BAD not in GitRepo(linked).branches()
