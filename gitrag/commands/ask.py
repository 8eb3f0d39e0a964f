from __future__ import annotations

import sys
from typing import Any

from rich.markup import escape

from gitrag import output
from gitrag.answer import Answer, weak_message, write_answer
from gitrag.config import Settings
from gitrag.errors import EXIT_OK, StoreError
from gitrag.retrieval import AskResponse
from gitrag.retrieval import ask as run_ask
from gitrag.store import SearchFilter
from gitrag.workspace import Workspace, open_workspace


def ask(question: str, repo: str, k: int, mode: str, path: str, lang: str, no_answer: bool, as_json: bool,
        expand: int = 0, exclude: tuple[str, ...] = (), files: bool = False, worktree: bool = True,
        offset: int = 0, rev: str = "") -> int:
    from gitrag.daemon import routing

    scope = SearchFilter(path, lang, tuple(exclude)) if (path or lang or exclude) else None  # checks the globs
    # None: no daemon runs
    more = {"worktree": worktree, "offset": offset, "rev": rev}  # gitrag.worktree, paging, gitrag.revisions
    routed = routing.ask(repo, question, k, mode, path, lang, no_answer, expand, exclude=tuple(exclude), files=files,
                         **more)
    catching_up = None
    if routed is not None:
        response, settings, catching_up = routed
    else:
        ws = open_workspace(repo)
        try:
            if rev:
                response = _ask_revision(ws, rev, question, k=k, mode=mode, scope=scope, expand=expand, files=files,
                                         offset=offset)
            else:
                response = run_ask(ws, question, k=k, mode=mode, scope=scope, expand=expand, files=files,
                                   worktree_overlay=worktree, offset=offset)
        except StoreError as exc:  # a daemon started since we looked, and holds the store: ask it
            again = routing.ask(repo, question, k, mode, path, lang, no_answer, expand, exclude=tuple(exclude),
                                files=files, **more) if routing.held_elsewhere(exc) else None
            if again is None:
                raise
            response, _, catching_up = again
        finally:
            ws.close()
        settings = ws.settings
    written = _answer(settings, response, no_answer, as_json)
    if as_json:
        extra = {"catching_up": catching_up}
        output.emit_json(response.to_json() | written.to_json() | extra)
    elif response.files is not None:
        _print_files(response, catching_up, _none_found(path, lang, exclude))
    else:
        _print(response, snippets=not written.text, catching_up=catching_up, none=_none_found(path, lang, exclude))
    return EXIT_OK


def _ask_revision(ws: Workspace, rev: str, question: str, **kw: Any) -> AskResponse:
    """``ask --rev`` in-process: the revision view is a sync, so it takes the index lock."""
    from gitrag import index_lock, revisions

    with index_lock.held(ws.data_dir, lambda pid: output.info(index_lock.waiting_notice(pid))):
        return revisions.ask(ws, rev, question, **kw)


def _answer(settings: Settings, r: AskResponse, no_answer: bool, as_json: bool) -> Answer:
    """The written answer, streamed to stdout unless ``as_json``. A chat failure is one
    line on stderr and ``answer_error`` in JSON; the exit code stays 0 because the
    ranked citations, printed either way, are the primary product."""
    if no_answer or not settings.chat_model:
        if not no_answer and not as_json:
            output.info("hint: set GITRAG_CHAT_MODEL (an Ollama chat model, e.g. llama3.2) for a written answer with citations")
        return Answer()

    def stream(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    written = write_answer(settings, r.question, r.results, r.mode, on_text=None if as_json else stream)
    if not as_json and written.text:
        stream("\n\n")
    if written.strength is not None and written.strength.weak and not as_json:
        output.out.print(weak_message(r.question, written.strength), markup=False)
    if written.error and not as_json:
        output.error(written.error)
    return written


def _none_found(path: str, lang: str, exclude: tuple[str, ...]) -> str:
    """What to print for no results: with filters, which ones (they may have left out everything)."""
    given = [f"--path {path}"] if path else []
    given += [f"--lang {lang}"] if lang else []
    given += [f"--exclude {glob}" for glob in exclude]
    if not given:
        return "no results"
    return (f"no results with {' '.join(given)}: --path is a prefix of repository-relative paths, --lang a "
            f"language name as in the results (python, javascript, markdown, text, ...)")


def _print(r: AskResponse, snippets: bool = True, catching_up: str | None = None, none: str = "no results") -> None:
    f = r.freshness
    if not r.results:
        output.out.print(none, markup=False)
    for i, res in enumerate(r.results, r.offset + 1):
        via = f"  [dim](used by {res.expanded_from})[/]" if res.expanded_from else ""
        via += "  [yellow]\\[work tree][/]" if res.source == "worktree" else ""
        output.out.print(
            f"[bold]{i:>2}. {_printable(res.path)}:{res.start_line}-{res.end_line}[/]  {_printable(res.symbol)}"
            f"  [dim]{res.score:.4f}[/]{via}"
        )
        lines = res.snippet.splitlines() if snippets else []
        for line in lines[:8]:
            output.out.print("      " + line, markup=False)
        if len(lines) > 8:
            output.out.print(f"      [dim]… {len(lines) - 8} more lines[/]")
    _print_freshness(r, catching_up)


def _print_freshness(r: AskResponse, catching_up: str | None = None) -> None:
    f = r.freshness
    if r.revision:
        output.out.print(f"[dim]revision {_printable(r.revision)} ({str(f.commit)[:12]}): answered from that commit's "
                         f"tree; {_printable(f.branch)} is checked out[/]")
        return
    todo = catching_up or "run `gitrag index`"
    state = "up to date" if f.up_to_date else f"index at {str(f.commit)[:12]}, HEAD at {str(f.head)[:12]}: {todo}"
    extra = f"; {f.worktree_changes} work-tree file(s) changed, not indexed" if f.worktree_changes else ""
    if r.worktree and r.worktree.get("searched") and f.worktree_changes:
        extra = f"; {f.worktree_changes} work-tree file(s) changed, searched from the work tree"
    output.out.print(f"[dim]{f.branch}: {state}{extra}[/]")


def _print_files(r: AskResponse, catching_up: str | None = None, none: str = "no results") -> None:
    """Ranked files, each with its best chunks' lines, symbol and score."""
    if not r.files:
        output.out.print(none, markup=False)
    for i, hit in enumerate(r.files or [], 1):
        more = f"  [dim]({hit.matches} matching chunks)[/]" if hit.matches > 1 else ""
        output.out.print(f"[bold]{i:>2}. {_printable(hit.path)}[/]  [dim]{hit.score:.4f}[/]{more}")
        for c in hit.chunks:
            output.out.print(f"      {c.start_line}-{c.end_line}  {_printable(c.symbol)}  [dim]{c.score:.4f}[/]")
    _print_freshness(r, catching_up)


def _printable(text: str) -> str:
    """``text`` on one line, safe inside rich markup: control characters (a newline in a
    file name) escaped, ``[`` escaped."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return escape(text)
