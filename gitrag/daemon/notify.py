"""``gitrag notify HOOK [ARGS...]``: hand one git hook event to the daemon, or spool it.

The hooks run it detached (``<installing python> -P -m gitrag.notify``; ``-P`` keeps the
repository being committed, which is the cwd, from shadowing the gitrag package), so it
never prints and always exits 0; a failure is appended to ``<state dir>/notify.log``.
It imports only the standard library (tests/test_hooks.py checks it):

    1. strip the GIT_* variables git exports to hooks (GIT_DIR, GIT_INDEX_FILE, ...)
    2. with ``--after-rebase GITDIR``: wait until that rebase has ended (a fast-forward
       rebase fires no post-rewrite, so the checkout that started it speaks at its end)
    3. find the work tree and the common git dir (one ``git rev-parse``)
    4. apply the environment ``gitrag install`` recorded in the git dir (GITRAG_HOME and
       the XDG folders: :mod:`gitrag.git.hookenv`), so the caller's does not matter; drop the
       event unless the repository is registered, logging why (``dropped.jsonl``)
    5. send ``{"op": "notify"}`` with a 1 s timeout; when no daemon answers, append the
       event to the spool, which the daemon drains when it starts: no event is lost

``--branch NAME`` (post-commit, post-merge, post-rewrite): the branch the hook ran on, read
off HEAD by the hook itself before git returned, so the daemon syncs that branch even when
HEAD has moved on by the time it runs. The event carries it as ``"branch"``; an event
without one (a hook installed by an older gitrag, a detached HEAD) names the work tree only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from gitrag.git import hookenv
from gitrag.git.hookenv import no_git_env

if TYPE_CHECKING:
    from gitrag.daemon.protocol import HookEvent

SEND_TIMEOUT = 1.0  # seconds: connect + reply
REBASE_POLL = 0.2  # seconds between looks at the rebase state
REBASE_WAIT = 12 * 3600.0  # seconds: an interactive rebase may stop for a long time


def rebasing(git_dir: Path) -> bool:
    """Whether a rebase (not a plain ``git am``) is in progress in this work tree's git dir."""
    return (git_dir / "rebase-merge").is_dir() or (git_dir / "rebase-apply" / "rebasing").exists()


def wait_rebase_end(git_dir: Path, poll: float = REBASE_POLL, limit: float = REBASE_WAIT) -> None:
    deadline = time.monotonic() + limit
    while rebasing(git_dir) and time.monotonic() < deadline:
        time.sleep(poll)


def _rev_parse(env: dict[str, str], cwd: Path, *args: str) -> str | None:
    """One path git prints for ``git rev-parse ARGS`` at ``cwd`` (only the final newline is
    taken off: a path may hold a newline); None when git fails or prints nothing."""
    try:
        proc = subprocess.run(["git", "rev-parse", *args], cwd=cwd, env=env, capture_output=True, check=False)
    except OSError:  # cwd gone (filter-branch's .git-rewrite/t is removed once it ends)
        return None
    out = os.fsdecode(proc.stdout[:-1] if proc.stdout.endswith(b"\n") else proc.stdout)
    return out if proc.returncode == 0 and out else None


def locate(env: dict[str, str], cwd: Path) -> tuple[str, str] | None:
    """``(work tree, common git dir)`` of the repository at ``cwd``; None outside one. One
    ``git rev-parse`` for both; two (one path each) when a path holds a newline."""
    for absolute in (["--path-format=absolute"], []):  # the option needs git 2.31
        both = _rev_parse(env, cwd, *absolute, "--show-toplevel", "--git-common-dir")
        if both is None:
            continue
        lines = both.split("\n")
        if len(lines) != 2:  # a newline in a path: ask for each on its own
            top, common = _rev_parse(env, cwd, "--show-toplevel"), _rev_parse(env, cwd, *absolute, "--git-common-dir")
            if top is None or common is None:
                continue
            lines = [top, common]
        return str(Path(lines[0]).resolve()), str((cwd / lines[1]).resolve())
    return None


def locate_git_dir(env: dict[str, str], git_dir: Path) -> tuple[str, str] | None:
    """``(work tree, common git dir)`` from a work tree's git dir, for a hook whose cwd is gone
    by the time the notifier runs (filter-branch runs git in ``.git-rewrite/t``, then removes
    it): a linked worktree's git dir names its ``.git`` file in ``gitdir``; a main git dir is
    its work tree's ``.git``, unless core.worktree says otherwise. None for a bare repository."""
    linked = git_dir / "gitdir"
    try:
        if linked.is_file():
            top = Path(linked.read_bytes().rstrip(b"\n").decode("utf-8", "surrogateescape")).parent
            common = _rev_parse(env, top, "--git-common-dir")
            return (str(top.resolve()), str((top / common).resolve())) if common else None
    except OSError:
        return None
    proc = subprocess.run(["git", "--git-dir", str(git_dir), "config", "--get", "core.worktree"], env=env,
                          capture_output=True, check=False)
    configured = os.fsdecode(proc.stdout.rstrip(b"\n")) if proc.returncode == 0 else ""
    top = (git_dir / configured) if configured else git_dir.parent
    return locate(env, top) if top.is_dir() else None


def event(hook: str, hook_args: list[str], worktree: str, common_dir: str,
          branch: str | list[str] | None = None) -> HookEvent:
    """The notify request's args: which repository and work tree, what happened, and (when the
    hook said, and the name is UTF-8: it travels as JSON) the branch(es) it happened on:
    ``"branch"`` the first (what a daemon of before ``branches`` reads), ``"branches"`` all of
    them when there are several (reference-transaction: ``git fetch origin a:a b:b``)."""
    ev: HookEvent = {"repo": worktree, "common_dir": common_dir, "hook": hook, "args": hook_args,
                              "time": round(time.time(), 3)}
    names = [branch] if isinstance(branch, str) else list(branch or ())
    names = list(dict.fromkeys(b for b in names if b and _utf8(b)))
    if names:
        ev["branch"] = names[0]
    if len(names) > 1:
        ev["branches"] = names
    return ev


def _utf8(text: str) -> bool:
    """False for a str holding surrogate escapes (argv bytes that were not UTF-8). The same
    test as gitrag.git.repo's, which this module cannot import: gitrepo needs pygit2, and the
    hook path imports only the standard library."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def deliver(ev: HookEvent) -> str:
    """Send ``ev`` to the daemon, else spool it; returns ``"sent"`` or ``"spooled"``."""
    from gitrag.daemon import client, spool

    try:
        client.request("notify", timeout=SEND_TIMEOUT, **ev)
        return "sent"
    except client.CommandError:
        return "sent"  # the daemon heard it and declined: spooling would not change that
    except (client.DaemonError, OSError):
        spool.append(ev)  # a timeout may mean the daemon got it too: a duplicate is harmless
        return "spooled"


def run(argv: list[str]) -> str:
    """The notifier's work; returns what happened (``sent``, ``spooled`` or why nothing)."""
    parser = argparse.ArgumentParser(prog="gitrag notify", description="Hand a git hook event to the gitrag daemon.")
    parser.add_argument("--after-rebase", metavar="GITDIR", help="first wait until the rebase in GITDIR has ended")
    parser.add_argument("--branch", metavar="NAME", action="append", default=[],
                        help="a branch the hook ran on or moved (its HEAD then); repeatable")
    parser.add_argument("--git-dir", metavar="GITDIR", help="the hook's git dir, absolute: where to look when the "
                        "cwd is gone")
    parser.add_argument("hook")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args(argv)
    env = no_git_env()
    os.environ.clear()
    os.environ.update(env)
    if opts.after_rebase:
        wait_rebase_end(Path(opts.after_rebase))
    try:
        found = locate(env, Path.cwd())
    except OSError:  # the cwd is gone
        found = None
    if found is None and opts.git_dir:
        found = locate_git_dir(env, Path(opts.git_dir))
    if found is None:
        hookenv.log_drop(opts.hook, "not a repository (git rev-parse found no work tree here, nor at --git-dir)")
        return "not a repository"
    hookenv.apply(Path(found[1]))  # the GITRAG_HOME (and XDG folders) `gitrag install` ran with
    from gitrag.daemon import registry

    if not registry.is_registered(found[1]):
        hookenv.log_drop(opts.hook, "not registered: run `gitrag install` in it", repo=found[0])
        return "not registered"
    return deliver(event(opts.hook, opts.args, *found, branch=opts.branch))


def _log_failure() -> None:
    exc = sys.exc_info()[1]
    hookenv.log_drop(next((a for a in sys.argv[1:] if not a.startswith("-")), "?"),
                     f"the notifier failed: {exc!r}"[:300] + " (traceback in notify.log)")
    try:
        from gitrag import config

        folder = config.state_dir()
        config.private_mkdir(folder)
        with (folder / "notify.log").open("a") as fh:
            fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(sys.argv)}\n{traceback.format_exc()}\n")
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``gitrag notify`` and ``python -m gitrag.notify``; always returns 0."""
    try:
        os.setsid()  # out of the terminal's process group: Ctrl-C on the next command spares us
    except OSError:
        pass
    try:
        run(sys.argv[1:] if argv is None else argv)
    except SystemExit:  # argparse: bad usage from a hand-written call
        pass
    except Exception:  # noqa: BLE001 - the hook path never fails a git command: logged
        _log_failure()
    return 0


if __name__ == "__main__":
    sys.exit(main())
