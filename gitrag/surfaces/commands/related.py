"""``gitrag related PATH:LINE``: the code most like the chunk at a location (gitrag.query.related)."""

from __future__ import annotations

from gitrag.errors import EXIT_OK, NotFound, StoreError
from gitrag.git import quoting
from gitrag.index.store import SearchFilter
from gitrag.index.workspace import open_workspace
from gitrag.surfaces import output


def related(location: str, repo: str, k: int, path: str, lang: str, exclude: tuple[str, ...], as_json: bool,
            worktree: bool = True, offset: int = 0) -> int:
    from gitrag.daemon import routing
    from gitrag.query.related import parse_location, to_json
    from gitrag.query.related import related as run
    from gitrag.surfaces.commands.ask import (
        UNINDEXED_MARK,
        WORKTREE_MARK,
        _print,
        _printable,
        _revived,
    )
    from gitrag.surfaces.shellpath import repository_prefix

    where, line = parse_location(location)
    where = _repository_path(where, repo)
    typed, path = path, repository_prefix(path, repo)  # as ask --path: what a shell gives (gitrag.surfaces.shellpath)
    scope = SearchFilter(path, lang, tuple(exclude)) if (path or lang or exclude) else None
    args = {"location": f"{where}:{line}", "k": k, "path": path, "lang": lang, "exclude": list(exclude),
            "worktree": worktree, "offset": offset}
    data = routing.related(repo, **args)
    if data is None and _revived(repo):  # an installed repository's daemon died: started again, as ask does
        data = routing.related(repo, **args)
    if data is None:  # no daemon: in-process
        ws = open_workspace(repo, create=False)
        try:
            response, here = run(ws, where, line, k=k, scope=scope, worktree_overlay=worktree, offset=offset)
            data = to_json(response, here)
        except StoreError as exc:
            data = routing.related(repo, **args) if routing.held_elsewhere(exc) else None
            if data is None:
                raise
        finally:
            ws.close()
    if path and not data["results"]:  # a typo'd --path: say so, as for a PATH that is not indexed
        _no_such_prefix(repo, data["commit"], path, f"--path {_printable(typed)}")
    if as_json:
        output.emit_json(data)
        return EXIT_OK
    here = data["located"]
    response = routing.response_from_json(data)
    mark = "" if here.get("source") != "worktree" else f"  {UNINDEXED_MARK if here.get('in_head') else WORKTREE_MARK}"
    output.line(f"like {quoting.quote(here['path'])}:{here['start_line']}-{here['end_line']}  {here['symbol']}{mark}")
    _print(response)
    return EXIT_OK


def _no_such_prefix(repo: str, commit: str | None, path: str, named: str) -> None:
    """Raise NotFound (exit 1, one line with the nearest prefixes, gitrag.query.prefixes) when no
    file of ``commit``'s tree starts with ``path``: results that can never come are not an answer."""
    from gitrag.query import prefixes
    from gitrag.surfaces.commands.ask import tree_paths

    paths = tree_paths(repo, commit) if commit else None
    said = prefixes.unmatched(paths, path, named) if paths is not None else None
    if said:
        raise NotFound(said)


def _repository_path(where: str, repo: str) -> str:
    """``where`` as the index spells it (relative to the repository's root, ``/``-separated).
    A path as a shell gives it (relative to the current folder, e.g. typed in a subfolder
    with tab completion, or absolute) names the same file when no such repository-relative
    file exists; anything else is left as it is, for the index to say what it holds. The
    root is found as the daemon client finds it (a few ``stat`` calls): the repository is
    opened once, by the daemon or by the in-process workspace, not here too."""
    import os
    from pathlib import Path

    from gitrag.daemon import routing

    root = routing.workdir(repo)
    if root is None:  # a bare repository: no work tree for a path to be relative to
        return where
    on_disk = os.fsdecode(quoting.path_bytes(where))  # the index spells a byte that is not UTF-8 \xNN
    if not os.path.isabs(on_disk) and os.path.lexists(root / on_disk):
        return where
    here = Path(on_disk) if os.path.isabs(on_disk) else Path.cwd() / on_disk
    try:
        rel = here.resolve().relative_to(root.resolve())
    except ValueError:  # outside the repository
        return where
    return quoting.decode_path(os.fsencode(rel.as_posix())) if here.exists() else where
