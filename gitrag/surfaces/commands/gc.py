from __future__ import annotations

from gitrag.daemon import gc as index_gc
from gitrag.daemon.gc import worktrees
from gitrag.errors import EXIT_ERROR, EXIT_OK, GitragError
from gitrag.git.repo import GitRepo
from gitrag.index.workspace import open_workspace
from gitrag.surfaces import output


def gc(repo: str, as_json: bool) -> int:
    from gitrag.daemon import routing

    result = routing.gc(repo)  # the daemon holds the store while it runs
    if result is None:
        try:
            ws = open_workspace(repo)
        except GitragError as exc:
            if not index_gc.disk_full(exc):
                raise
            result = index_gc.unopened_pass(exc)  # still frees what needs no database write
        else:
            try:
                checked_out = {b for p in worktrees(ws.repo.common_dir) if (b := GitRepo(p).checked_out())}
                result = index_gc.full_pass(ws, checked_out)
            finally:
                ws.close()
    errors = result.get("errors") or []
    if as_json:
        output.emit_json(result)
        return EXIT_ERROR if errors else EXIT_OK
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
    if not any(e["step"] == "open" for e in errors):  # not measured when the state could not be opened
        output.out.print(f"disk: {result['bytes_before'] / 1e6:.1f} MB -> {result['bytes_after'] / 1e6:.1f} MB")
    if not errors:
        return EXIT_OK
    for e in errors:
        output.error(f"gc failed at {STEPS.get(e['step'], e['step'])}: {e['error']}")
    if any(e.get("disk_full") for e in errors):
        output.error("the disk is full: gc did what it could (above: what needs no database write, and the steps "
                     "that did not fail); free space elsewhere and run `gitrag gc` again for the rest")
    return EXIT_ERROR


#: what each step of gitrag.daemon.gc.full_pass does, for its error line
STEPS = {"open": "opening this repository's index",
         "repositories_dropped": "dropping the data of repositories that no longer exist",
         "deleted": "forgetting deleted branches", "dropped": "taking idle branches out of the store",
         "optimized": "optimizing the store's collections",
         "registrations_pruned": "pruning the daemon registry", "cache": "deleting unreferenced cache entries"}
