"""``gitrag daemon``: run the daemon in the foreground, or stop the running one."""

from __future__ import annotations

from gitrag.errors import EXIT_OK, DaemonStuck
from gitrag.surfaces import output


def daemon(log_level: str, json_logs: bool | None, debounce: float, reconcile: float, orphan: float = 600.0) -> int:
    """Serve until SIGTERM/SIGINT or ``gitrag daemon --stop`` (or, with no repository
    registered, ``orphan`` seconds without a request; 0: never). Raises AlreadyRunning."""
    from gitrag import logs
    from gitrag.daemon.run import Options, run

    logs.configure(log_level, json_logs)
    return run(Options(debounce_s=debounce, reconcile_s=reconcile, orphan_s=orphan))


def stop() -> int:
    """Stop the running daemon (it finishes its current sync first) and wait until it is gone.
    One that accepts but does not answer (SIGSTOP'd, wedged) is stopped by signals
    (gitrag.daemon.launch.stop_unanswering). Raises DaemonStuck when its pid cannot be read."""
    from gitrag.daemon import client, handshake, launch

    try:
        pid = launch.stop()
    except client.Timeout:
        pid = handshake.stuck_pid()
        if pid is None:
            raise DaemonStuck("the gitrag daemon accepts connections but does not answer, and its pid cannot be "
                              "read (no SO_PEERCRED, no daemon.lock): find it with `ps` and `kill` it") from None
        output.info(f"the gitrag daemon (pid {pid}) does not answer (stopped or suspended?): sending SIGTERM")
        how = launch.stop_unanswering(pid)
        output.info(f"stopped the gitrag daemon (pid {pid}) with {how}")
        return EXIT_OK
    output.info("no gitrag daemon is running" if pid is None else f"stopped the gitrag daemon (pid {pid})")
    return EXIT_OK
