from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from gitrag.errors import EXIT_OK, ConfigError, StoreError
from gitrag.index.store import SearchFilter
from gitrag.index.workspace import Workspace, open_workspace
from gitrag.query import ranking
from gitrag.query.evaluation import load_dataset, run_dataset
from gitrag.query.evaluation.grep import GrepBaseline, head_files
from gitrag.query.evaluation.report import print_report
from gitrag.query.retrieval import search
from gitrag.surfaces import output, syncing

INDEX_MODES = ("hybrid", "dense", "sparse")
ALL_MODES = (*INDEX_MODES, "rrf", "grep", "ripgrep")  # rrf: the store's RRF fusion without gitrag.query.ranking
DEFAULT_MODES = (*INDEX_MODES, "grep")


def evaluate(
    questions: str, repo: str, modes: Sequence[str], k: int, scope: str | None, as_json: bool,
    ablate: Sequence[str] = (), exclude: Sequence[str] = (),
) -> int:
    """Index ``repo``, run every mode on the question set, print or emit the report.

    ``ablate``: ranking stages (gitrag.query.ranking.STAGES); each adds a mode ``hybrid-STAGE``,
    hybrid with that stage switched off, beside full hybrid (added when missing).
    ``exclude``: gitignore-style globs left out of every mode."""
    ablate = list(dict.fromkeys(ablate))
    if ablate:
        try:
            ranking.check(ablate)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        modes = list(modes or DEFAULT_MODES)
        if "hybrid" not in modes:
            modes.insert(0, "hybrid")
    data = load_dataset(questions)
    excluded = SearchFilter(exclude=tuple(exclude)) if exclude else None  # checks the globs first
    scope = data.scope if scope is None else scope
    from gitrag.daemon import routing

    routing.release(repo)  # a daemon that used the repository lately closes its store for this run
    ws = open_workspace(repo)
    held = contextlib.ExitStack()  # the repository's index lock, released after the store closes
    try:
        held.enter_context(syncing.locked(ws))
        summary = syncing.sync_shown(ws, not as_json)
        if not as_json:
            output.info(f"index of {summary.branch} at {summary.commit[:12]}: {summary.chunks_total} chunks")
        report = run_dataset(data, _searchers(ws, modes or DEFAULT_MODES, k, scope, ablate, excluded), k, scope)
    except StoreError as exc:
        if not routing.held_elsewhere(exc):
            raise
        raise StoreError("gitrag eval searches the index in its own process, and the running gitrag daemon holds "
                         "it: stop the daemon for the run (`gitrag daemon --stop`; git events meanwhile are kept "
                         "and indexed when it runs again: `gitrag daemon`, or `systemctl --user start gitrag`)"
                         ) from None
    finally:
        ws.close()
        held.close()
    if as_json:
        result = report.to_json()
        result["commit"] = summary.commit
        output.emit_json(result)
    else:
        print_report(report, output.out)
    return EXIT_OK


def _searchers(
    ws: Workspace, modes: Sequence[str], k: int, scope: str | None, ablate: Sequence[str] = (),
    excluded: SearchFilter | None = None,
) -> dict[str, Callable[[str], Any]]:
    """One search function per mode; ``excluded`` (its ``exclude`` globs) applies to all,
    in the store query for gitrag's modes, on the file set for the grep baselines."""
    globs = excluded.exclude if excluded else ()
    flt = SearchFilter(path_prefix=scope or "", exclude=globs) if (scope or globs) else None
    searchers: dict[str, Callable[[str], Any]] = {}
    for mode in dict.fromkeys(modes):
        if mode in INDEX_MODES:
            searchers[mode] = lambda q, m=mode: search(ws, q, k=k, mode=m, scope=flt, snippets=False)
        elif mode == "rrf":
            searchers[mode] = lambda q: search(ws, q, k=k, mode="hybrid", scope=flt, snippets=False, rerank_results=False)
        if mode == "hybrid":
            for stage in ablate:
                searchers[f"hybrid-{stage}"] = lambda q, st=stage: search(
                    ws, q, k=k, mode="hybrid", scope=flt, snippets=False, disable=(st,))
    if "grep" in modes or "ripgrep" in modes:
        files = head_files(ws.repo.root, scope or None)
        grep = GrepBaseline((p, t) for p, t in files if not (excluded and excluded.excludes(p)))
        if "grep" in modes:
            searchers["grep"] = lambda q: grep.search(q, k)
        if "ripgrep" in modes:
            searchers["ripgrep"] = lambda q: grep.ripgrep(q, k)
    return searchers
