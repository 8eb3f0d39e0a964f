"""``gitrag index --publish``: sync the local index, then publish it to the team server
(gitrag.index.publish; docs/team.md). Always in this process: the publish reads the local
store's points, which a running daemon holds (then: one line saying so)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from gitrag.errors import EXIT_OK, ConfigError, StoreHeld
from gitrag.index.indexer import IndexSummary
from gitrag.index.workspace import open_workspace
from gitrag.surfaces import output, syncing


def index_and_publish(repo: str, as_json: bool, rebuild: bool, wait_s: float, as_branch: str = "",
                      show: Callable[[IndexSummary], None] = lambda summary: None) -> int:
    """``gitrag index --publish``: sync the local index, then publish it; ``show`` prints the
    sync's summary (the index command's own printer) before the publish line."""
    from gitrag.index import publish, team

    ws = open_workspace(repo, rebuild=rebuild)
    try:
        s = ws.settings
        if not s.team_url:
            raise ConfigError("--publish needs a team server: set GITRAG_TEAM_URL (or team_url in your config)")
        if s.team_role != "writer":
            raise ConfigError("this machine's team role is 'reader' (read-only): publishing needs GITRAG_TEAM_ROLE=writer "
                              "(team_role in your config), usually on the CI job only")
        with syncing.locked(ws):
            try:
                summary = syncing.sync_shown(ws, not as_json, rebuild)
            except StoreHeld as exc:
                raise StoreHeld(f"{exc} (--publish reads the local index in this process: stop the daemon with "
                                f"`gitrag daemon --stop`, or publish from a clone without one, as CI does)") from None
            server = team.open_server(s)
            try:
                with output.progress_bar(not as_json, "publishing") as progress:
                    done = publish.publish(ws, server, s, wait=wait_s, notice=output.info, progress=progress,
                                           as_branch=as_branch)
            finally:
                with contextlib.suppress(Exception):
                    server.close()
    finally:
        with contextlib.suppress(Exception):
            ws.close()
    if as_json:
        output.emit_json(summary.to_json() | {"publish": done.to_json()})
    else:
        show(summary)
        repaired = f"; repaired {done.paths_repaired} paths of an unfinished publish" if done.paths_repaired else ""
        took = f" (took over the lease of {done.took_over})" if done.took_over else ""
        output.out.print(f"published {done.branch} @ {done.commit[:12]} to {done.collection} at {done.server}: "
                         f"{done.points} points ({done.points_upserted} written, {done.points_deleted} deleted, "
                         f"{done.payloads_updated} re-tagged){repaired}{took} in {done.seconds:.1f}s")
    return EXIT_OK
