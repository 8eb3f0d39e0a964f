"""``gitrag daemon``: run the daemon in the foreground, or stop the running one."""

from __future__ import annotations

from gitrag.errors import EXIT_OK
from gitrag.surfaces import output


def daemon(log_level: str, json_logs: bool | None, debounce: float, reconcile: float, orphan: float = 600.0) -> int:
    """Serve until SIGTERM/SIGINT or ``gitrag daemon --stop`` (or, with no repository
    registered, ``orphan`` seconds without a request; 0: never). Raises AlreadyRunning."""
    from gitrag import logs
    from gitrag.daemon.run import Options, run

    logs.configure(log_level, json_logs)
    return run(Options(debounce_s=debounce, reconcile_s=reconcile, orphan_s=orphan))


def stop() -> int:
    """Stop the running daemon (it finishes its current sync first) and wait until it is gone."""
    from gitrag.daemon import launch

    pid = launch.stop()
    output.info("no gitrag daemon is running" if pid is None else f"stopped the gitrag daemon (pid {pid})")
    return EXIT_OK
