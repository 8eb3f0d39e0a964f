"""The hook scripts and the notifier, in real repositories, with no daemon.

The hook tests install the real scripts with a stub interpreter that records how it was
called (arguments, cwd, its stdin/stdout/stderr), so they check exactly what the shell
part does: which events are sent, with which arguments, detached, and quickly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gitrag.daemon import registry, spool
from gitrag.daemon.notify import rebasing, wait_rebase_end
from gitrag.git import hooks as install
from gitrag.git.hookenv import no_git_env
from tests.daemonutil import gitrag, wait_for
from tests.gitutil import Repo

HOOK_DIR = Path(__file__).resolve().parents[1] / "hooks"
FORBIDDEN = ("tree_sitter", "qdrant_edge", "qdrant_client", "torch", "numpy", "click", "rich", "structlog", "pygit2")


def _stub(tmp_path: Path, sleep: float = 0.0) -> tuple[Path, Path]:
    """A fake interpreter that appends one JSON line per call to a log file."""
    log = tmp_path / "calls.jsonl"
    stub = tmp_path / "fake-python"
    stub.write_text(
        "#!/bin/sh\n"
        f"sleep {sleep}\n"
        'fds="$(readlink /proc/$$/fd/0) $(readlink /proc/$$/fd/1) $(readlink /proc/$$/fd/2)"\n'
        f'printf \'{{"argv": "%s", "cwd": "%s", "fds": "%s"}}\\n\' "$*" "$PWD" "$fds" >> {log}\n'
    )
    stub.chmod(0o755)
    return stub, log


def _calls(log: Path, every: bool = False) -> list[dict[str, str]]:
    """The notifier calls logged, without reference-transaction's (tests/test_fresh.py covers
    those) unless ``every``."""
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return calls if every else [c for c in calls if "reference-transaction" not in c["argv"]]


def _hook(argv: str) -> str:
    """The hook name in a notifier call's argv (after ``-P -m gitrag.notify`` and its options)."""
    return next(a for a in argv.split()[3:] if not a.startswith("--"))


@pytest.fixture
def hooked(repo: Repo, tmp_path: Path) -> tuple[Repo, Path]:
    """A repository with gitrag's hooks calling the stub interpreter; returns (repo, call log)."""
    stub, log = _stub(tmp_path)
    repo.write("a.py", "x = 1\n")
    repo.commit("first")
    install.install_hooks(install.Target(repo.path / ".git" / "hooks"), python=str(stub), refs=False)
    return repo, log


def test_scripts_are_posix_sh_with_lf_and_the_id_line(tmp_path: Path) -> None:
    for template in set(install.TEMPLATES.values()):
        data = (HOOK_DIR / template).read_bytes()
        assert b"\r" not in data and data.startswith(b"#!/bin/sh\n")
        assert install.ID_LINE.encode() in data
        assert os.access(HOOK_DIR / template, os.X_OK)
    for name in install.HOOKS:
        text = install.render(name, sys.executable)
        assert f'GITRAG_PYTHON={sys.executable}' in text and install.ID_LINE in text
        (tmp_path / name).write_text(text)
        assert subprocess.run(["sh", "-n", str(tmp_path / name)]).returncode == 0


def test_the_four_post_hooks_are_one_template_rendered_with_their_name() -> None:
    posts = [n for n in install.HOOKS if n.startswith("post-")]
    assert len(posts) == 4
    texts = {name: install.render(name, "/usr/bin/python3", refs=True).splitlines() for name in posts}
    for name, lines in texts.items():
        assert f"GITRAG_HOOK={name}" in lines and "GITRAG_REFS=1" in lines
        # all else is the same text: one block to read and to change, not four
        assert [x for x in lines if not x.startswith("GITRAG_HOOK=")] == \
            [x for x in texts["post-commit"] if not x.startswith("GITRAG_HOOK=")]


def test_commit_sends_one_detached_event_and_returns_at_once(repo: Repo, tmp_path: Path) -> None:
    stub, log = _stub(tmp_path, sleep=3.0)  # a slow notifier must not slow the commit
    repo.write("a.py", "x = 1\n")
    repo.commit("first")
    install.install_hooks(install.Target(repo.path / ".git" / "hooks"), python=str(stub), refs=False)
    repo.write("b.py", "y = 2\n")
    t0 = time.monotonic()
    repo.commit("second")
    assert time.monotonic() - t0 < 2.0
    call = wait_for(lambda: _calls(log), "the notifier to run", deadline_s=10)[0]
    assert call["argv"] == "-P -m gitrag.notify --branch=main post-commit"
    assert Path(call["cwd"]).resolve() == repo.path.resolve()
    assert call["fds"] == "/dev/null /dev/null /dev/null"


def test_checkout_events(hooked: tuple[Repo, Path]) -> None:
    repo, log = hooked
    repo.git("checkout", "-q", "-b", "feature")
    repo.write("a.py", "x = 2\n")
    repo.git("checkout", "--", "a.py")  # a file checkout: flag 0, nothing sent
    repo.git("worktree", "add", "-q", str(repo.path.parent / "wt"), "-b", "wt")  # old SHA all zeros
    calls = wait_for(lambda: len(_calls(log)) >= 2 and _calls(log), "two checkout events")
    time.sleep(0.3)  # not an assertion: a stray third event would have arrived by now
    argv = [c["argv"].split() for c in _calls(log)]
    assert [a[3] for a in argv] == ["post-checkout", "post-checkout"]
    assert argv[0][6] == "1" and argv[1][4] == "0" * 40
    assert Path(calls[1]["cwd"]).resolve() == (repo.path.parent / "wt").resolve()


def test_rebase_sends_nothing_until_its_end(hooked: tuple[Repo, Path]) -> None:
    repo, log = hooked
    repo.git("checkout", "-q", "-b", "topic")
    for i in range(20):
        repo.write(f"t{i}.py", f"v = {i}\n")
        repo.commit(f"topic {i}")
    repo.git("checkout", "-q", "main")
    repo.write("m.py", "m = 1\n")
    repo.commit("main moves")
    repo.git("checkout", "-q", "topic")
    before = len(wait_for(lambda: len(_calls(log)) >= 24 and _calls(log), "setup events"))  # 3 checkouts, 21 commits
    repo.git("rebase", "-q", "main")
    wait_for(lambda: len(_calls(log)) >= before + 2 and _calls(log), "the rebase's events")
    time.sleep(0.5)  # not an assertion: lets a stray per-pick event arrive, which would fail below
    during = [c["argv"] for c in _calls(log)[before:]]
    assert sorted(_hook(a) if "--after-rebase" not in a else "after" for a in during) == ["after", "post-rewrite"]
    assert "-P -m gitrag.notify --branch=topic post-rewrite rebase" in during  # HEAD is back on topic


def test_amend_sends_post_commit_and_post_rewrite(hooked: tuple[Repo, Path]) -> None:
    repo, log = hooked
    repo.git("commit", "-q", "--amend", "-m", "amended")
    calls = wait_for(lambda: len(_calls(log)) >= 2 and _calls(log), "amend events")
    assert sorted(_hook(c["argv"]) for c in calls) == ["post-commit", "post-rewrite"]
    assert all("--branch=main " in c["argv"] for c in calls)


def test_hooks_name_the_branch_they_ran_on_without_starting_git(hooked: tuple[Repo, Path], tmp_path: Path) -> None:
    """post-commit, post-merge and post-rewrite pass the branch HEAD is on (read off HEAD with
    the shell's ``read``: a checkout right after the commit must not hide it), start no git
    doing so (a `git` first on PATH records every call), and pass none on a detached HEAD."""
    repo, log = hooked
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    git_calls = tmp_path / "git-calls"
    (bin_dir / "git").write_text(f'#!/bin/sh\necho "$*" >> {git_calls}\nexit 1\n')
    (bin_dir / "git").chmod(0o755)
    env = {**no_git_env(), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    hooks = repo.path / ".git" / "hooks"
    repo.git("checkout", "-q", "-b", "feature/ünï")
    wait_for(lambda: _calls(log), "the checkout's event")
    seen = len(_calls(log))
    runs = [("post-commit",), ("post-merge", "0"), ("post-rewrite", "amend")]
    for args in runs:
        subprocess.run([str(hooks / args[0]), *args[1:]], cwd=repo.path, env=env, check=True)
    repo.git("checkout", "-q", "--detach")
    subprocess.run([str(hooks / "post-commit")], cwd=repo.path, env=env, check=True)
    calls = wait_for(lambda: len(_calls(log)) >= seen + 5 and _calls(log), "the hooks' events")[seen:]
    by_hook = sorted(c["argv"] for c in calls if _hook(c["argv"]) != "post-checkout")
    assert by_hook == ["-P -m gitrag.notify --branch=feature/ünï post-commit",
                       "-P -m gitrag.notify --branch=feature/ünï post-merge 0",
                       "-P -m gitrag.notify --branch=feature/ünï post-rewrite amend",
                       "-P -m gitrag.notify post-commit"]  # detached: no branch
    assert not git_calls.exists()  # the branch cost no git process


def test_legacy_hook_runs_first_with_its_exit_status(repo: Repo, tmp_path: Path) -> None:
    stub, log = _stub(tmp_path)
    hooks = repo.path / ".git" / "hooks"
    marker = tmp_path / "legacy-ran"
    (hooks / "post-rewrite").write_text(f"#!/bin/sh\ncat > {marker}\nexit 3\n")
    (hooks / "post-rewrite").chmod(0o755)
    install.install_hooks(install.Target(hooks), python=str(stub), refs=False)
    proc = subprocess.run([str(hooks / "post-rewrite"), "amend"], input="old new\n", text=True, cwd=repo.path,
                          env=no_git_env())
    assert proc.returncode == 3  # the legacy hook's status
    assert marker.read_text() == "old new\n"  # it got the rewritten list on stdin
    assert wait_for(lambda: _calls(log), "our notifier too")[0]["argv"].endswith("post-rewrite amend")


def test_notify_loads_only_the_standard_library(repo: Repo) -> None:
    repo.write("a.py", "x = 1\n")
    repo.commit("first")
    registry.add(repo.path / ".git")
    code = (
        "import sys, json\n"
        "before = set(sys.modules)\n"
        "import gitrag.notify, gitrag.daemon.notify  # the entry the hooks run, and its code\n"
        "outcome = gitrag.daemon.notify.run(['post-commit'])\n"
        "new = sorted(set(sys.modules) - before)\n"
        "print(json.dumps({'outcome': outcome, 'new': new, 'all': sorted(sys.modules)}))\n"
    )
    proc = subprocess.run([sys.executable, "-P", "-c", code], cwd=repo.path, capture_output=True, text=True, check=True)
    data = json.loads(proc.stdout)
    assert data["outcome"] == "spooled"  # no daemon: the full path ran, spool included
    assert not [m for m in data["all"] if m.split(".")[0] in FORBIDDEN]
    foreign = {m.split(".")[0] for m in data["new"]} - set(sys.stdlib_module_names) - {"gitrag"}
    assert not foreign, f"the notifier imported non-stdlib modules: {sorted(foreign)}"


def test_notify_spools_without_daemon_and_strips_git_env(repo: Repo) -> None:
    repo.write("a.py", "x = 1\n")
    repo.commit("first")
    registry.add(repo.path / ".git")
    env = {**os.environ, "GIT_DIR": "/nonexistent", "GIT_INDEX_FILE": "/nonexistent/index"}
    subprocess.run([sys.executable, "-m", "gitrag", "notify", "post-merge", "0"], cwd=repo.path, env=env, check=True)
    (event,) = spool.drain()
    assert event["hook"] == "post-merge" and event["args"] == ["0"]
    assert Path(event["repo"]) == repo.path.resolve()
    assert Path(event["common_dir"]) == (repo.path / ".git").resolve()
    assert "GIT_DIR" not in no_git_env({"GIT_DIR": "x", "GIT_SSH_COMMAND": "ssh", "HOME": "/h"})


def test_notify_sends_the_branch_when_the_hook_names_one(repo: Repo) -> None:
    repo.write("a.py", "x = 1\n")
    repo.commit("first")
    registry.add(repo.path / ".git")
    for branch in ("--branch=feature/ünï", b"--branch=bad-\xff-utf8", None):
        argv = [sys.executable, "-m", "gitrag", "notify", *([branch] if branch else []), "post-commit"]
        subprocess.run(argv, cwd=repo.path, check=True)
    named, undecodable, old_hook = spool.drain()
    assert named["branch"] == "feature/ünï" and named["hook"] == "post-commit"
    # a name that cannot travel as JSON text, and an older hook's call: the work tree only
    assert "branch" not in undecodable and "branch" not in old_hook and undecodable["hook"] == "post-commit"


def test_notify_ignores_unregistered_repositories(repo: Repo) -> None:
    repo.write("a.py", "x = 1\n")
    repo.commit("first")
    assert gitrag("notify", "post-commit", cwd=repo.path).returncode == 0
    assert spool.pending() == 0


def test_after_rebase_waits_for_the_rebase_to_end(tmp_path: Path) -> None:
    (tmp_path / "rebase-merge").mkdir()
    assert rebasing(tmp_path)
    t0 = time.monotonic()
    wait_rebase_end(tmp_path, poll=0.01, limit=0.2)  # gives up after the limit
    assert time.monotonic() - t0 >= 0.2
    (tmp_path / "rebase-merge").rmdir()
    assert not rebasing(tmp_path)


PRE_COMMIT_STANDIN = """#!/bin/sh
# File generated by pre-commit: https://pre-commit.com
# A stand-in for pre-commit's script: like it, it runs its own .legacy first and refuses to
# run itself again (pre-commit exits "bug: ... migration mode" then).
if [ -n "$PRE_COMMIT_RUNNING_LEGACY" ]; then echo "bug: migration mode" >&2; exit 1; fi
if [ -x "$0.legacy" ]; then PRE_COMMIT_RUNNING_LEGACY=1 "$0.legacy" "$@" || exit $?; fi
echo "pre-commit ran" >> MARKER
"""


def test_pre_commit_hooks_run_gitrag_as_their_legacy(repo: Repo, tmp_path: Path) -> None:
    stub, log = _stub(tmp_path)
    hooks, marker = repo.path / ".git" / "hooks", tmp_path / "marker"
    (hooks / "post-commit").write_text(PRE_COMMIT_STANDIN.replace("MARKER", str(marker)))
    (hooks / "post-commit").chmod(0o755)
    original = (hooks / "post-commit").read_bytes()
    changes = install.install_hooks(install.Target(hooks), python=str(stub), refs=False)
    assert any("pre-commit's" in c for c in changes)
    assert (hooks / "post-commit").read_bytes() == original and install.is_ours(hooks / "post-commit.legacy")
    assert install.install_hooks(install.Target(hooks), python=str(stub), refs=False) == []  # idempotent here too
    repo.write("a.py", "x = 1\n")
    repo.commit("first")
    assert marker.read_text() == "pre-commit ran\n"
    assert wait_for(lambda: _calls(log), "gitrag's notifier")[0]["argv"].endswith("post-commit")
    install.uninstall_hooks(hooks)
    assert (hooks / "post-commit").read_bytes() == original and not (hooks / "post-commit.legacy").exists()
