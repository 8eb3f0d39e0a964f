"""``gitrag doctor``: check and explain, one line each, with the command that fixes it.

Checks: git version; hooks installed, registered, runnable (LF line ends, compared as
bytes) and not shadowed (core.hooksPath, a missing interpreter); daemon reachable (and
events waiting in the spool); embedder usable (Ollama: a valid host, server reachable and
model pulled; static and local: model files checked, nothing loaded); store writable;
which config files were read (and a stale ``$GITRAG_HOME/config.toml`` that is not); index
lag per branch; integrity: the store's points (payload digests, dense vectors against the
vector cache, membership against the manifests) and the cache's rows (digests), a bounded
sample, or every one with ``--deep``.
Exit code 1 when a check fails, else 0 (warnings do not fail).
"""

from __future__ import annotations

import os
import re
import shlex
import sqlite3
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gitrag import config
from gitrag.config import Settings
from gitrag.daemon import client, registry, spool
from gitrag.errors import EXIT_ERROR, EXIT_OK, GitragError, StoreError, StoreHeld
from gitrag.git.hooks import HOOKS, REF_HOOK_GIT, explain, find_target, is_ours, line_end_fault, slot
from gitrag.git.repo import GitRepo
from gitrag.surfaces import output

MIN_GIT = (2, 26)  # git config --show-scope


@dataclass
class Check:
    """``status``: ok | warn | fail; ``fix``: the command or edit that fixes it ("" if none)."""

    name: str
    status: str
    detail: str
    fix: str = ""


def check_git() -> Check:
    try:
        text = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        return Check("git", "fail", f"git does not run: {exc}", "install git 2.26 or newer")
    found = tuple(int(n) for n in re.findall(r"\d+", text)[:2])
    if found < MIN_GIT:
        return Check("git", "fail", f"{text}: older than 2.26", "install git 2.26 or newer")
    if found < REF_HOOK_GIT:
        return Check("git", "warn", f"{text}: older than 2.28, which runs no reference-transaction hook, so a "
                     f"reset, branch -f, update-ref, filter-branch or fetch into a local branch reaches the index "
                     f"only at the next reconcile (up to 300 s) or `gitrag ask`", "install git 2.28 or newer")
    return Check("git", "ok", text)


def check_hooks(repo: GitRepo) -> Check:
    target = find_target(repo)
    if not registry.is_registered(repo.common_dir):
        return Check("hooks", "fail", f"{repo.common_dir} is not registered: the daemon ignores its events",
                     f"gitrag install --repo {repo.root}")
    missing = [n for n in HOOKS if not (is_ours(slot(target.folder, n)) and os.access(slot(target.folder, n), os.X_OK))]
    if missing:
        shadow = ""
        if target.hooks_path:
            shadow = f" (core.hooksPath={target.hooks_path} shadows {repo.common_dir / 'hooks'})"
        return Check("hooks", "fail", f"{', '.join(missing)} not installed in {target.folder}{shadow}",
                     f"gitrag install --repo {repo.root}")
    broken = [(n, fault) for n in HOOKS if (fault := line_end_fault(slot(target.folder, n)))]
    if broken:
        names = ", ".join(n for n, _ in broken)
        return Check("hooks", "fail", f"{names} in {target.folder} {broken[0][1]}: the daemon hears of no commit",
                     f"gitrag install --repo {repo.root} (rewrites them with LF line ends)")
    python = _hook_python(slot(target.folder, HOOKS[0]))
    if python and not os.access(python, os.X_OK):
        return Check("hooks", "fail", f"the hooks run {python}, which is gone", f"gitrag install --repo {repo.root}")
    lines = explain(target, repo.root)
    if lines:
        return Check("hooks", "fail", f"core.hooksPath={target.hooks_path}: the project's hooks do not call gitrag's",
                     "add: " + "; ".join(lines))
    return Check("hooks", "ok", f"{len(HOOKS)} hooks in {target.folder}, run by {python}")


def _hook_python(path: Path) -> str | None:
    """The interpreter a hook runs, read as sh reads its ``GITRAG_PYTHON=`` word (quoted by
    ``shlex.quote``: a path may hold spaces, quotes or a newline)."""
    text = path.read_text(errors="replace")
    match = re.search(r"^GITRAG_PYTHON=", text, re.M)
    if match is None:
        return None
    lex = shlex.shlex(text[match.end():], posix=True)
    lex.whitespace_split = True
    try:
        return lex.get_token() or None
    except ValueError:  # an unbalanced quote: a hook edited by hand
        return None


DROPS_SINCE_S = 7 * 86400.0  # doctor reports the events dropped in the last week


def check_events(repo: GitRepo) -> Check:
    """The hook events dropped for this repository (gitrag.git.hookenv's log), and whether its
    hooks report to the GITRAG_HOME this shell uses."""
    from gitrag.git import hookenv

    root = str(repo.root)
    mine = [d for d in hookenv.drops(time.time() - DROPS_SINCE_S)
            if d.get("repo") == root or str(d.get("cwd") or "").startswith(root)]
    if mine:
        last = mine[-1]
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(last.get("time", 0))))
        return Check("events", "warn", f"{len(mine)} hook event(s) dropped in the last 7 days, the last at {when} "
                     f"({last.get('hook')}): {last.get('reason')} (log: {hookenv.drop_log()})",
                     f"gitrag install --repo {root}, then `gitrag index --repo {root}`")
    env = hookenv.recorded(repo.common_dir)
    if env is not None and env.get("GITRAG_HOME") != hookenv.recorded_value("GITRAG_HOME"):
        there = env.get("GITRAG_HOME") or "unset"
        here = hookenv.recorded_value("GITRAG_HOME") or "unset"
        return Check("events", "warn", f"this repository's hooks report to GITRAG_HOME={there} (recorded by "
                     f"`gitrag install`); this shell has GITRAG_HOME={here}",
                     f"run gitrag with GITRAG_HOME={there}, or `gitrag install --repo {root}` from this shell")
    return Check("events", "ok", "no hook event dropped in the last 7 days")


def check_daemon() -> Check:
    t0 = time.perf_counter()
    info = client.probe()
    waiting = spool.pending()
    queued = f"; {waiting} event(s) wait in {spool.spool_path()}" if waiting else ""
    if info.get("error"):
        return Check("daemon", "fail", info["error"] + queued, "see SECURITY.md: the socket")
    if info.get("stuck"):
        from gitrag.daemon import handshake

        pid = info.get("pid") or handshake.stuck_pid()
        named = f" (pid {pid})" if pid is not None else ""
        return Check("daemon", "fail", f"the daemon{named} at {info['socket']} accepts connections but does not "
                     f"answer (stopped or suspended?){queued}", handshake.stuck_advice(pid))
    if not info["running"]:
        return Check("daemon", "fail", f"not reachable at {info['socket']}{queued}",
                     "gitrag install (or `systemctl --user start gitrag`, or `gitrag daemon`)")
    ms = (time.perf_counter() - t0) * 1000
    from gitrag import build

    if not build.same(info):
        return Check("daemon", "fail", f"pid {info['pid']} runs gitrag {info.get('version')} (build "
                     f"{info.get('build') or 'unnamed: older'}), this is gitrag {build.describe()}{queued}",
                     "gitrag install (restarts it), or `gitrag daemon --stop` and start it again")
    return Check("daemon", "ok", f"pid {info['pid']} at {info['socket']}, answered in {ms:.0f} ms{queued}")


def check_embedder(settings: Settings) -> Check:
    if settings.embedder == "ollama":
        from gitrag.index.embedders.ollamahost import model_names, parse_host

        model = settings.ollama_model
        try:
            host = parse_host(settings.ollama_host)
        except GitragError as exc:
            return Check("embedder", "fail", str(exc), "set GITRAG_OLLAMA_HOST, e.g. http://127.0.0.1:11434")
        try:
            names = model_names(host)
        except (OSError, ValueError) as exc:
            return Check("embedder", "fail", f"Ollama not reachable at {host}: {exc}", "ollama serve")
        wanted = {model, model if ":" in model else f"{model}:latest"}
        if not wanted & set(names):
            return Check("embedder", "fail", f"Ollama at {host} has no model {model}", f"ollama pull {model}")
        via = " (from OLLAMA_HOST)" if "OLLAMA_HOST" in settings.sources else ""
        return Check("embedder", "ok", f"Ollama at {host}{via}, model {model} pulled")
    from gitrag.index.embedders import create
    from gitrag.index.embedders.base import SelfChecking

    t0 = time.perf_counter()
    try:
        embedder = create(settings)
        if isinstance(embedder, SelfChecking):  # static, local: checked from their files, no model loaded
            return Check("embedder", "ok", f"{settings.embedder}: {embedder.self_check()}")
        embedder.embed_query("gitrag doctor")
    except GitragError as exc:
        return Check("embedder", "fail", f"{settings.embedder}: {exc}", "see README.md, \"Configuration\" (embedder) and \"Install it as a tool\" (the transformer extra)")
    ms = (time.perf_counter() - t0) * 1000
    return Check("embedder", "ok", f"{settings.embedder}: dim {embedder.dim}, embedded a query in {ms:.0f} ms")


def check_store(repo: GitRepo, settings: Settings) -> Check:
    data_dir = config.repo_data_dir(repo.common_dir)
    try:
        config.private_data_dir(data_dir)
        with tempfile.NamedTemporaryFile(dir=data_dir, prefix=".doctor-"):
            pass
    except OSError as exc:
        return Check("store", "fail", f"{data_dir} is not writable: {exc}", f"fix the permissions of {data_dir}")
    if settings.store_kind == "server":
        from gitrag.index.store import open_store

        try:
            open_store(settings, data_dir).list_collections()
        except GitragError as exc:
            return Check("store", "fail", f"Qdrant at {settings.qdrant_url}: {exc}", "check GITRAG_QDRANT_URL")
    free_gb = os.statvfs(data_dir).f_bavail * os.statvfs(data_dir).f_frsize / 1e9
    status = "warn" if free_gb < 1 else "ok"
    return Check("store", status, f"{settings.store_kind}, {data_dir} writable, {free_gb:.1f} GB free")


def check_config(settings: Settings) -> Check:
    """Which user config file was read (or would be: it may not exist), then the other sources
    of ``settings`` in order; fails on a broken ``.gitrag.toml`` (``settings.problems``: it is
    ignored whole); warns about a ``$GITRAG_HOME/config.toml``, which is not read."""
    user = config.config_file()
    how = "GITRAG_CONFIG" if os.environ.get("GITRAG_CONFIG") else "user config"
    found = f"read {user} ({how})" if str(user) in settings.sources else f"no user config file at {user} (defaults)"
    others = [s for s in settings.sources if s != str(user)]
    detail = found + (f"; then {', '.join(others)}" if others else "")
    if settings.problems:  # a broken .gitrag.toml: ignored whole, so its settings are silently not in force
        return Check("config", "fail", f"{settings.problems[0]}; {detail}",
                     "correct the line named (the settings and their types: README, \"Configuration\"), or "
                     "`git rm .gitrag.toml` and commit")
    stale = config.stale_config_file()
    if stale is not None:
        return Check("config", "warn", f"{stale} is not read (GITRAG_HOME holds data, not settings); {detail}",
                     f"mv {stale} {user}")
    return Check("config", "ok", detail)


def check_lag(repo: GitRepo) -> list[Check]:
    from gitrag.index.state import State

    try:
        state = State(config.repo_data_dir(repo.common_dir))
    except GitragError as exc:  # unreadable state or cache (a read-only home): one failed check, not the end
        return [Check("lag", "fail", str(exc))]
    try:
        branches = state.branches()
    except sqlite3.DatabaseError as exc:  # a damaged state.db: name it and the fix
        return [Check("lag", "fail", f"{state.path} is damaged ({exc})", f"gitrag index --rebuild --repo {repo.root}")]
    finally:
        state.close()
    if not branches and repo.head() is None:
        return [Check("lag", "warn", f"no commit yet on {repo.branch()}: nothing to index",
                      "commit first (`git commit`); then `gitrag index`, or the hooks, index it")]
    if not branches:
        return [Check("lag", "warn", "nothing indexed yet", f"gitrag index --repo {repo.root}")]
    from gitrag.daemon.status import branch_kind

    checks = []
    current = repo.branch()
    for b in branches:
        tip = repo.branch_tip(b.name) if b.name in repo.branches() else None
        head = tip if tip is not None else (repo.head() if b.name == current else None)
        kind = branch_kind(b.name, head, current)  # a view is not a branch: never "gone"
        if kind == "revision":
            checks.append(Check(f"lag {b.name}", "ok", "an `ask --rev` view: at its commit by definition"))
        elif kind == "detached" and head is None:
            checks.append(Check(f"lag {b.name}", "ok", "a detached HEAD's view, not checked out now"))
        elif head is None:
            checks.append(Check(f"lag {b.name}", "ok", "branch deleted in git: `gitrag gc` forgets its index"))
        elif head == b.indexed_commit:
            checks.append(Check(f"lag {b.name}", "ok", f"up to date at {head[:12]}"))
        else:
            checks.append(Check(f"lag {b.name}", "warn", f"{lag_phrase(repo, head, b.indexed_commit)}: indexed "
                                f"{str(b.indexed_commit or 'nothing')[:12]}, head {head[:12]}", f"gitrag index --repo {repo.root}"))
    return checks


def check_integrity(repo: GitRepo, deep: bool) -> Check:
    """The store against the manifests and the vector cache, the cache rows against their
    digests (gitrag.index.integrity.audit): all of them with ``deep``, a bounded sample otherwise."""
    from gitrag.index import integrity
    from gitrag.index.workspace import open_workspace

    name = "integrity"
    by_daemon = _integrity_by_daemon(repo, deep)
    if by_daemon is not None:
        return by_daemon
    t0 = time.perf_counter()
    try:
        ws = open_workspace(repo.root)
    except GitragError as exc:
        return Check(name, "fail", str(exc))
    try:
        if not ws.state.branches():
            return Check(name, "ok", "nothing indexed yet: nothing to check")
        problems, counts = integrity.audit(ws, deep)
    except (sqlite3.DatabaseError, ValueError) as exc:  # SQLite's own error, or a row whose JSON no longer decodes
        return Check(name, "fail", f"{ws.state.path} is damaged ({exc})", f"gitrag index --rebuild --repo {repo.root}")
    except StoreError as exc:
        if isinstance(exc, StoreHeld):
            return _held_by_daemon(repo)
        return Check(name, "fail", str(exc), f"gitrag index --rebuild --repo {repo.root}")
    finally:
        ws.close()
    ms = (time.perf_counter() - t0) * 1000
    what = "every" if deep else "a sample:"
    if problems:
        return Check(name, "fail", "; ".join(problems), f"gitrag index --rebuild --repo {repo.root}")
    return Check(name, "ok", f"{what} {counts['points']} points and {counts['rows']} cache rows verified "
                             f"in {ms:.0f} ms" + ("" if deep else " (`--deep` checks them all)"))


def _held_by_daemon(repo: GitRepo) -> Check:
    return Check("integrity", "warn", "the daemon holds the store and cannot run the check (an older daemon?): "
                 "its contents were not checked", "restart it (`gitrag daemon --stop`, then `gitrag daemon`) and run "
                 f"`gitrag doctor --deep --repo {repo.root}` again")


def _integrity_by_daemon(repo: GitRepo, deep: bool) -> Check | None:
    """The integrity check run by a running daemon over its socket (it holds the store open, so
    this process could not open it), or None when no daemon runs: then the check runs here."""
    from gitrag.daemon import client, routing

    try:
        got = routing.integrity(str(repo.root), deep)
    except client.CommandError as exc:
        if exc.kind == "UnknownOp":
            return _held_by_daemon(repo)
        return Check("integrity", "fail", f"the daemon's check failed: {exc}", f"gitrag index --rebuild --repo {repo.root}")
    except GitragError as exc:  # a daemon that does not answer: said by the daemon check too
        return Check("integrity", "warn", f"the daemon did not run the check: {exc}")
    if got is None:
        return None
    if not got["indexed"]:
        return Check("integrity", "ok", "nothing indexed yet: nothing to check")
    if got["problems"]:
        return Check("integrity", "fail", "; ".join(got["problems"]), f"gitrag index --rebuild --repo {repo.root}")
    what = "every" if deep else "a sample:"
    return Check("integrity", "ok", f"{what} {got['points']} points and {got['rows']} cache rows verified by the "
                                    f"daemon in {got['ms']:.0f} ms" + ("" if deep else " (`--deep` checks them all)"))


def lag_phrase(repo: GitRepo, head: str, indexed: str | None) -> str:
    """How the indexed commit stands to ``head``: ``3 commit(s) behind``; ``1 commit(s) ahead of
    HEAD (HEAD moved back: a reset?)``; ``on another line of history (...)``; ``? commit(s)
    behind`` when the indexed commit is not in the repository any more."""
    if not indexed:
        return "not indexed yet (the first index has not finished)"
    if not repo.has_commit(indexed):
        return "? commit(s) behind (the indexed commit is gone from the repository)"
    missing, extra = repo.ahead_behind(head, indexed)  # in HEAD only, in the index only
    if extra == 0:
        return f"{missing} commit(s) behind"
    if missing == 0:
        return f"{extra} commit(s) ahead of HEAD (HEAD moved back: a reset?)"
    return (f"on another line of history: HEAD has {missing} commit(s) the index lacks, the index {extra} "
            f"HEAD lacks (a rebase, amend or reset?)")


def doctor(repo: str, as_json: bool, deep: bool = False) -> int:
    """Run every check; print one line each (or ``{"ok", "checks": [...]}``). ``deep``:
    the integrity check reads every point and cache row (see :func:`check_integrity`)."""
    r = GitRepo(repo)
    settings = config.load_settings(r.workdir)
    checks = [check_git(), check_hooks(r), check_events(r), check_daemon(), check_embedder(settings),
              check_store(r, settings), check_config(settings)]
    checks += check_lag(r)
    checks.append(check_integrity(r, deep))
    ok = all(c.status != "fail" for c in checks)
    if as_json:
        output.emit_json({"ok": ok, "checks": [asdict(c) for c in checks]})
    else:
        for c in checks:
            _print(c)
    return EXIT_OK if ok else EXIT_ERROR


def _print(c: Check) -> None:
    mark: dict[str, Any] = {"ok": "[green]ok  [/]", "warn": "[yellow]warn[/]", "fail": "[red]FAIL[/]"}
    fix = f"  -> {c.fix}" if c.fix and c.status != "ok" else ""
    output.out.print(f"{mark[c.status]} {c.name:<12} ", end="")
    output.out.print(f"{c.detail}{fix}", markup=False)
