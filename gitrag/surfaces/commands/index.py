from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from gitrag.errors import EXIT_OK, EmptyRepository, StoreError
from gitrag.index.indexer import IndexSummary
from gitrag.index.workspace import open_workspace
from gitrag.surfaces import output, syncing

POLL_S = 0.5  # how often a routed index asks the daemon for its progress
# Ctrl-C: what was done stays (the batched sync's journal and the vector cache, see
# gitrag.index.indexer.Indexer._apply); the next sync redoes the journaled paths from the cache
INTERRUPTED = ("gitrag: interrupted; nothing is lost: the next `gitrag index` (or the daemon's next sync) continues "
               "from what this one did, without embedding it again")


def index(repo: str, as_json: bool, rebuild: bool = False, publish: bool = False, wait_s: float = 0.0,
          as_branch: str = "") -> int:
    from gitrag.daemon import routing

    _require_commit(repo)  # before anything is written: no data folder, no id file in the git dir
    if publish:  # in this process: the publish reads the local store's points (gitrag.surfaces.commands.publish)
        from gitrag.surfaces.commands.publish import index_and_publish

        return index_and_publish(repo, as_json, rebuild, wait_s, as_branch, show=_print)
    routed = _through_daemon(repo, rebuild, as_json)  # the daemon holds the store while it runs
    if routed is not None:
        if not as_json:
            output.info("indexed by the running daemon")
        summary = IndexSummary(**{k: v for k, v in routed.items() if k in IndexSummary.__dataclass_fields__})
    else:
        ws = open_workspace(repo, rebuild=rebuild)
        try:
            summary = syncing.sync_and_close(ws, not as_json, rebuild)
        except BaseException as exc:
            with contextlib.suppress(Exception):  # interrupted while waiting for the lock: still open
                ws.close()
            if isinstance(exc, KeyboardInterrupt):
                output.info(INTERRUPTED)
            # a daemon started since we looked, and holds the store: it syncs instead
            again = routing.index(repo, rebuild) if isinstance(exc, StoreError) and routing.held_elsewhere(exc) else None
            if again is None:
                raise
            summary = IndexSummary(**{k: v for k, v in again.items() if k in IndexSummary.__dataclass_fields__})
    if as_json:
        output.emit_json(summary.to_json())
    else:
        _print(summary)
    return EXIT_OK


def _require_commit(repo: str) -> None:
    """Raise EmptyRepository (one line, exit 1) when HEAD has no commit: nothing to index, so
    nothing is written (no data folder, no id file in the git dir, no daemon asked). A
    repository with commits on other branches, on an unborn (orphan) branch, names the branch."""
    from gitrag.git.repo import GitRepo

    git = GitRepo(repo)
    name = git.branch()  # a name gitrag refuses says so first
    if git.head() is not None:
        return
    if not git.branches():
        raise EmptyRepository("nothing to index: the repository has no commits yet; commit something, then "
                              "`gitrag index`")
    raise EmptyRepository(f"nothing to index: branch {name!r} has no commits yet; commit something, then "
                          "`gitrag index`")


def _through_daemon(repo: str, rebuild: bool, as_json: bool) -> dict[str, Any] | None:
    """``routing.index`` (None: no daemon runs), showing the daemon's progress as an
    in-process sync shows its own (a bar on a terminal, else a line on stderr every
    GITRAG_PROGRESS_INTERVAL s): a thread polls the daemon's ``progress`` op every POLL_S
    seconds while the request waits. A daemon without that op syncs silently, as before."""
    from gitrag.daemon import routing
    from gitrag.git.repo import GitRepo

    if routing.progress(repo) is None:  # no daemon (or an older one): nothing to show
        return routing.index(repo, rebuild)
    done = threading.Event()

    def poll(show: Callable[[str, int, int], None]) -> None:
        last = None
        while not done.wait(POLL_S):
            info = routing.progress(repo)
            if info is None:
                return
            now = (info.get("stage"), info.get("done"), info.get("total"))
            if now[0] and now != last and isinstance(now[1], int) and isinstance(now[2], int):
                show(*now)
                last = now

    with output.progress_bar(not as_json, f"indexing {GitRepo(repo).branch()}") as show:
        poller = threading.Thread(target=poll, args=(show,), name="gitrag-index-progress", daemon=True)
        poller.start()
        try:
            return routing.index(repo, rebuild)
        finally:
            done.set()
            poller.join()


def _chunk_parts(s: IndexSummary) -> str:
    """The parts ``chunks_total`` is made of, adding up to it: embedded now, from the vector cache,
    repeats of a chunk embedded now (same text: embedded once), and those already in the index."""
    parts = [f"{s.chunks_embedded} embedded", f"{s.chunks_reused} from cache"]
    if s.chunks_repeated:
        parts.append(f"{s.chunks_repeated} repeats of another chunk")
    kept = s.chunks_total - s.chunks_embedded - s.chunks_reused - s.chunks_repeated
    if kept > 0:
        parts.append(f"{kept} unchanged")
    return ", ".join(parts)


def _print(s: IndexSummary) -> None:
    head = f"{s.branch} @ {s.commit[:12]}"
    if s.previous_commit == s.commit and not (s.points_upserted or s.points_deleted):
        output.out.print(f"{head}: up to date ({s.chunks_total} chunks)")
        return
    output.out.print(
        f"{head}: {s.files_indexed} files indexed, {s.files_skipped} skipped, {s.files_deleted} deleted; "
        f"{s.chunks_total} chunks ({_chunk_parts(s)}); "
        f"{s.points_upserted} points written, {s.points_deleted} deleted in {s.seconds:.1f}s"
    )
    if s.started_from:
        output.out.print(f"  started from the index of branch {s.started_from!r}")
    from gitrag.index.policy import reason_kind

    reasons: dict[str, int] = {}  # per kind: per-file detail ("average line 428889 bytes") is in --json
    for item in s.skipped:
        kind = reason_kind(item["reason"])
        reasons[kind] = reasons.get(kind, 0) + 1
    for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        output.out.print(f"  skipped {n:>5}  {reason}")
