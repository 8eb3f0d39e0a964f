from __future__ import annotations

import contextlib

from gitrag import output
from gitrag.errors import EXIT_OK, StoreError
from gitrag.indexer import Indexer, IndexSummary
from gitrag.workspace import open_workspace


def index(repo: str, as_json: bool, rebuild: bool = False) -> int:
    from gitrag.daemon import routing

    routed = routing.index(repo, rebuild)  # the daemon holds the store while it runs
    if routed is not None:
        if not as_json:
            output.info("indexed by the running daemon")
        summary = IndexSummary(**{k: v for k, v in routed.items() if k in IndexSummary.__dataclass_fields__})
    else:
        ws = open_workspace(repo, rebuild=rebuild)
        try:
            with output.progress_bar(not as_json, f"indexing {ws.repo.branch()}") as progress:
                summary = Indexer(ws, progress).sync(rebuild=rebuild)
        except BaseException as exc:
            with contextlib.suppress(Exception):  # the sync's error is the one to report
                ws.close()
            # a daemon started since we looked, and holds the store: it syncs instead
            again = routing.index(repo, rebuild) if isinstance(exc, StoreError) and routing.held_elsewhere(exc) else None
            if again is None:
                raise
            summary = IndexSummary(**{k: v for k, v in again.items() if k in IndexSummary.__dataclass_fields__})
        else:
            ws.close()
    if as_json:
        output.emit_json(summary.to_json())
    else:
        _print(summary)
    return EXIT_OK


def _print(s: IndexSummary) -> None:
    head = f"{s.branch} @ {s.commit[:12]}"
    if s.previous_commit == s.commit and not (s.points_upserted or s.points_deleted):
        output.out.print(f"{head}: up to date ({s.chunks_total} chunks)")
        return
    output.out.print(
        f"{head}: {s.files_indexed} files indexed, {s.files_skipped} skipped, {s.files_deleted} deleted; "
        f"{s.chunks_total} chunks ({s.chunks_embedded} embedded, {s.chunks_reused} from cache); "
        f"{s.points_upserted} points written, {s.points_deleted} deleted in {s.seconds:.1f}s"
    )
    if s.started_from:
        output.out.print(f"  started from the index of branch {s.started_from!r}")
    reasons: dict[str, int] = {}
    for item in s.skipped:
        reasons[item["reason"]] = reasons.get(item["reason"], 0) + 1
    for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        output.out.print(f"  skipped {n:>5}  {reason}")
