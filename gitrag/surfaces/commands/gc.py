from __future__ import annotations

from gitrag.daemon import gc as index_gc
from gitrag.daemon.gc import worktrees
from gitrag.errors import EXIT_OK
from gitrag.git.repo import GitRepo
from gitrag.index.workspace import open_workspace
from gitrag.surfaces import output


def gc(repo: str, as_json: bool) -> int:
    from gitrag.daemon import routing

    result = routing.gc(repo)  # the daemon holds the store while it runs
    if result is None:
        ws = open_workspace(repo)
        try:
            checked_out = {b for p in worktrees(ws.repo.common_dir) if (b := GitRepo(p).checked_out())}
            result = index_gc.full_pass(ws, checked_out)
        finally:
            ws.close()
    if as_json:
        output.emit_json(result)
        return EXIT_OK
    deleted = ", ".join(result["deleted"]) or "none"
    dropped = ", ".join(result["dropped"]) or "none"
    output.out.print(f"deleted branches forgotten: {deleted}")
    output.out.print(f"idle branches taken out of the store (back from the cache on use): {dropped}")
    gone = ", ".join(result.get("repositories_dropped", [])) or "none"
    output.out.print(f"data of repositories that no longer exist dropped: {gone}")
    pruned = [c["repo"] + (f" -> {c['moved_to']}" if c.get("moved_to") else " (gone)")
              for c in result.get("registrations_pruned", [])]
    output.out.print(f"daemon registry entries pruned: {', '.join(pruned) or 'none'}")
    output.out.print(f"cache entries deleted: {result['vectors_deleted']} vectors, {result['sparse_deleted']} sparse")
    output.out.print(f"disk: {result['bytes_before'] / 1e6:.1f} MB -> {result['bytes_after'] / 1e6:.1f} MB")
    return EXIT_OK
