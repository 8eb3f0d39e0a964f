"""``gitrag install`` and ``gitrag uninstall``: hooks, registration, a running daemon, first index."""

from __future__ import annotations

import time
from pathlib import Path

from gitrag import config
from gitrag.daemon import client, launch, registry
from gitrag.daemon import systemd as unit
from gitrag.errors import EXIT_OK, EmptyRepository, NotWritable
from gitrag.git.hooks import PRIVATE_DIR, Target, explain, find_target, install_hooks, uninstall_hooks
from gitrag.git.repo import GitRepo
from gitrag.surfaces import output


def install(repo: str, use_systemd: bool | None, first_index: bool) -> int:
    """Hooks -> registry -> daemon -> first index; prints each change (nothing on a re-run).
    Raises NotWritable before any hook is written when GITRAG_HOME (or the XDG folders) cannot be
    written, and SystemdError before any when ``use_systemd`` is asked for (True) but no
    systemd user manager answers or the unit cannot be written for these paths."""
    r = GitRepo(repo)
    config.check_writable()  # the registry, the daemon and the index need it: check before touching a hook
    if use_systemd:  # asked for by --systemd: find out that it cannot work before changing anything
        if not unit.available():
            raise unit.SystemdError("--systemd: no systemd user manager answers here (`systemctl --user` fails: "
                                    "no user bus in this session); nothing was changed: run `gitrag install "
                                    "--no-systemd` to start the daemon without systemd")
        unit.render()  # SystemdError for a path a unit cannot carry
    target = find_target(r)
    changes = install_hooks(target)
    _say(changes or [f"hooks already installed in {target.folder}"])
    _hooks_path_notes(target, r.root)
    _say_pruned(registry.prune())
    config.repo_data_dir(r.common_dir)  # gives the repository its id, which the registry records
    if registry.add(r.common_dir, target.folder):
        output.info(f"registered {r.common_dir} with the daemon")
    _record_env(r)
    _ensure_daemon(unit.available() if use_systemd is None else use_systemd)
    if first_index:
        _first_index(r)
    return EXIT_OK


def uninstall(repo: str) -> int:
    """Remove the hooks (restoring what they replaced) and forget the repository; when no
    repository is left, remove the systemd unit and stop the daemon. What cannot be done (a
    read-only GITRAG_HOME: the registry) is said after what was, then raises NotWritable."""
    r = GitRepo(repo)
    target = find_target(r)
    key = str(r.common_dir.resolve())
    try:
        _say_pruned(registry.prune())  # moved or deleted repositories are not "left"
    except OSError:
        pass  # a read-only GITRAG_HOME: nothing can be pruned now; the registry step below says so
    recorded = registry.load().get(key, {}).get("hooks")
    folders = {target.folder, r.common_dir / "hooks", r.common_dir / PRIVATE_DIR}
    folders |= {Path(recorded)} if recorded else set()
    changes: list[str] = []
    for folder in sorted(folders):
        users = [k for k, info in registry.load().items() if k != key and info.get("hooks") == str(folder)]
        if users:
            changes.append(f"left the hooks in {folder}: {len(users)} other registered repositories use them")
        elif folder.is_dir():
            changes += uninstall_hooks(folder)
    from gitrag.git import hookenv

    try:
        hookenv.forget(r.common_dir)
    except OSError:
        pass  # a git dir that cannot be written never had one
    if target.explain is not None:
        changes.append(f"remove the lines calling {target.folder} from the hooks in {target.explain}")
    try:  # read first: a repository never registered needs no write (an install that failed)
        if registry.is_registered(r.common_dir) and registry.remove(r.common_dir):
            changes.append(f"unregistered {r.common_dir}")
    except OSError as exc:
        _say(changes)
        raise NotWritable(f"{config.not_writable(registry.registry_path().parent, exc)}; {r.common_dir} is still "
                          f"registered with the daemon: run `gitrag uninstall` again once it is writable") from None
    if not registry.load():
        changes += unit.uninstall()
        pid = launch.stop()
        if pid is not None:
            changes.append(f"stopped the gitrag daemon (pid {pid}): no repository is registered any more")
    _say(changes or ["nothing to remove"])
    return EXIT_OK


def _record_env(r: GitRepo) -> None:
    """Record GITRAG_HOME and the XDG folders in the git dir, so hooks fired from another
    environment (an IDE, cron) report here (gitrag.git.hookenv); a git dir that cannot be
    written gets one line saying what that means."""
    from gitrag.git import hookenv

    try:
        if hookenv.recorded(r.common_dir) != {n: hookenv.recorded_value(n) for n in hookenv.NAMES}:
            hookenv.record(r.common_dir)
    except OSError as exc:
        output.info(f"could not write {r.common_dir / hookenv.ENV_FILE} ({exc.strerror}): commits from an "
                    f"environment without this one's GITRAG_HOME will not reach the daemon")


def _say_pruned(changes: list[dict[str, str | None]]) -> None:
    for change in changes:
        moved = change["moved_to"]
        output.info(f"registered {change['repo']} moved to {moved}" if moved else
                    f"forgot {change['repo']}: that repository no longer exists")


def _say(lines: list[str]) -> None:
    for line in lines:
        output.out.print(line, markup=False)


def _hooks_path_notes(target: Target, root: Path) -> None:
    if target.hooks_path is None:
        return
    where = f"core.hooksPath ({target.scope} config) is {target.hooks_path}"
    if target.explain is None:
        shared = " it is shared: the hooks fire in other repositories too, where they do nothing" \
            if target.scope in ("global", "system") else ""
        output.info(f"{where}, so gitrag's hooks went there.{shared}")
        return
    missing = explain(target, root)
    if missing:
        output.info(f"{where}, which belongs to the project (or husky), so gitrag wrote nothing there.\n"
                    f"Add these lines to the project's hooks so git runs gitrag's (each line is the same in every "
                    f"clone, and does nothing where gitrag is not installed: commit them):")
        _say([f"  {line}" for line in missing])


def _ensure_daemon(use_systemd: bool) -> None:
    from gitrag import build

    info = client.probe()
    if info.get("stuck"):
        from gitrag.daemon import handshake

        handshake.check()  # raises DaemonStuck: one line saying what to do (no second daemon beside it)
    if info["running"] and not build.same(info):  # an upgrade: the old daemon makes way
        launch.stop()
        output.info(f"stopped the gitrag daemon of gitrag {info.get('version')} (build {info.get('build') or '?'}, "
                    f"pid {info['pid']}): this is gitrag {build.describe()}")
        info = client.probe()
    if use_systemd:
        if info["running"]:
            launch.stop()  # a hand-started daemon makes way for the service
        try:
            _say(unit.install())
        except unit.SystemdError as exc:
            unit.uninstall()  # leave no unit file behind
            if info["running"]:
                launch.spawn()  # and give back the daemon that made way
            raise unit.SystemdError(f"{exc} (the hooks are in place and the repository is registered: only the "
                                    f"daemon is missing)") from None
        pid = launch.wait_running(30.0)
        output.info(f"the daemon runs (pid {pid}) under systemd; to keep it running while you are logged out: "
                    f"`loginctl enable-linger $USER`" if pid else f"systemd did not start the daemon: "
                    f"`journalctl --user -u {unit.UNIT}` says why")
        return
    if info["running"]:
        output.info(f"the gitrag daemon already runs (pid {info['pid']})")
        return
    pid = launch.spawn()
    output.info(f"started the gitrag daemon in the background (pid {pid}; log {launch.log_path()}). It does not "
                f"survive a reboot: use `gitrag install --systemd` where systemd user services work, or run "
                f"`gitrag daemon` from your session's start-up (see docs/daemon.md)")


def _first_index(r: GitRepo) -> None:
    from gitrag.daemon import routing

    if r.head() is None:  # nothing to index yet; the post-commit hook indexes the first commit
        output.info("no commit yet: the first commit will be indexed")
        return
    output.info("indexing the current branch (the first time embeds every chunk; progress: `gitrag status`)...")
    started = time.monotonic()
    try:
        summary = routing.index(str(r.root))
        if summary is None:  # the daemon went away: index in-process
            from gitrag.index.workspace import open_workspace
            from gitrag.surfaces import syncing

            ws = open_workspace(r.root)
            try:
                summary = syncing.sync_and_close(ws, True).to_json()
            finally:
                ws.close()  # interrupted while waiting for the lock: still open (twice is harmless)
    except client.CommandError as exc:
        if exc.kind != EmptyRepository.__name__:
            raise
        summary = None
    except EmptyRepository:
        summary = None
    if summary is None:
        output.info("no commit yet: the first commit will be indexed")
        return
    # the daemon may have synced on its own first (its start-up reconcile): report the wall time
    output.out.print(f"indexed {summary['branch']} @ {summary['commit'][:12]}: {summary['chunks_total']} chunks "
                     f"in {time.monotonic() - started:.1f}s", markup=False)
