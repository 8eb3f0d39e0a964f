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
            return _unopened(exc, as_json)
        try:
            checked_out = {GitRepo(p).branch() for p in worktrees(ws.repo.common_dir)}
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
    output.out.print(f"disk: {result['bytes_before'] / 1e6:.1f} MB -> {result['bytes_after'] / 1e6:.1f} MB")
    if not errors:
        return EXIT_OK
    for e in errors:
        output.error(f"gc could not finish {STEPS.get(e['step'], e['step'])}: {e['error']}")
    if any(e.get("disk_full") for e in errors):
        output.error("the disk is full: gc did the steps above that need no database write; free space elsewhere "
                     "and run `gitrag gc` again for the rest")
    return EXIT_ERROR


#: what each step of gitrag.daemon.gc.full_pass does, for its error line
STEPS = {"repositories_dropped": "dropping the data of repositories that no longer exist",
         "deleted": "forgetting deleted branches", "dropped": "taking idle branches out of the store",
         "registrations_pruned": "pruning the daemon registry", "cache": "deleting unreferenced cache entries"}


def _unopened(exc: GitragError, as_json: bool) -> int:
    """gc when the repository's state cannot be opened for want of space: it still deletes the
    data folders of repositories that no longer exist (no database write), and says so."""
    dropped: list[str] = []
    failed: list[dict[str, object]] = [{"step": "open", "error": index_gc.step_error(exc), "disk_full": True}]
    try:
        dropped = index_gc.drop_gone_repositories(None)
    except OSError as err:
        failed.append({"step": "repositories_dropped", "error": index_gc.step_error(err),
                       "disk_full": index_gc.disk_full(err)})
    if as_json:
        output.emit_json({"deleted": [], "dropped": [], "registrations_pruned": [], "repositories_dropped": dropped,
                          "vectors_deleted": 0, "sparse_deleted": 0, "errors": failed})
        return EXIT_ERROR
    output.out.print(f"data of repositories that no longer exist dropped: {', '.join(dropped) or 'none'}")
    output.error(f"gc could not open this repository's index: {failed[0]['error']}; the disk is full: gc did "
                 "only what needs no database write (above); free space elsewhere and run `gitrag gc` again")
    return EXIT_ERROR
