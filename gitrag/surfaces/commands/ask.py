"""``gitrag ask``. While a daemon runs, this imports only the route (gitrag.daemon.routing,
gitrag.query.results) and the printer: the in-process search stack (numpy, store, ranking,
workspace) is imported by :func:`_in_process` when no daemon answers, and the answer
writer only when a chat model is set."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

from gitrag.errors import EXIT_OK, GitragError
from gitrag.git import quoting
from gitrag.surfaces import output

if TYPE_CHECKING:
    from gitrag.config import Settings
    from gitrag.query.answer import Answer
    from gitrag.query.results import AskResponse


def from_options(params: dict[str, Any]) -> int:
    """:func:`ask` with the command line's parameters (cli.ask's names, as
    ``gitrag.surfaces.args.quick_ask`` gives them too): the one mapping of options to the command."""
    p = params
    return ask(p["question"], p["repo"], p["k"], p["mode"], p["path"], p["lang"], p["no_answer"], p["as_json"],
               p["expand"], tuple(p["exclude"]), p["files"], p["blame"], worktree=not p["committed"],
               offset=p["offset"], rev=p["rev"].strip())


def ask(question: str, repo: str, k: int, mode: str, path: str, lang: str, no_answer: bool, as_json: bool,
        expand: int = 0, exclude: tuple[str, ...] = (), files: bool = False, blame: bool = False, worktree: bool = True,
        offset: int = 0, rev: str = "") -> int:
    from gitrag.daemon import routing
    from gitrag.surfaces.shellpath import repository_prefix

    typed, path = path, repository_prefix(path, repo)  # `./doc`, `doc/`, an absolute path, one relative to a subfolder
    if exclude:  # a bad glob is an error before anything is asked (imports the store's types: --exclude only)
        from gitrag.index.store.base import SearchFilter

        SearchFilter(path, lang, tuple(exclude))
    # None: no daemon runs
    more = {"worktree": worktree, "offset": offset, "rev": rev}  # gitrag.query.worktree, paging, gitrag.query.revisions
    # a team server (docs/team.md) answers first; any failure of it is one line and the local index answers
    routed: Any = None if rev else _team(repo, question, k, mode, path, lang, expand, tuple(exclude), files, offset)
    def via_daemon() -> Any:
        return routing.ask(repo, question, k, mode, path, lang, no_answer, expand, exclude=tuple(exclude),
                           files=files, **more)

    if routed is None:
        routed = via_daemon()
    if routed is None and _revived(repo):  # an installed repository's daemon died: started again (gitrag.daemon.revive)
        routed = via_daemon()
    catching_up = None
    if routed is not None:
        response, settings, catching_up = routed
    else:
        response, settings, catching_up = _in_process(repo, question, k, mode, path, lang, no_answer, expand,
                                                      tuple(exclude), files, more)
    for said in _unmatched(repo, response, path, tuple(exclude), typed):  # stderr: stdout (and --json) stays the answer
        output.info(said)
    blames = _blames(repo, response) if blame else None
    written = _answer(settings, response, no_answer, as_json)
    todo = catching_up  # what the freshness line says to do about a lagging index
    if routed is None and todo is None and response.freshness is not None and not response.freshness.up_to_date:
        todo = _no_daemon_hint(repo)
    if as_json:
        if written is None:
            from gitrag.query.answer import Answer

            written = Answer()
        extra = {"catching_up": catching_up}
        data = response.to_json() | written.to_json() | extra
        for res, b in zip(data["results"], blames or ()):
            res["blame"] = b
        output.emit_json(data)
    elif response.files is not None:
        _print_files(response, todo, _none_found(path, lang, exclude))
    else:
        _print(response, snippets=not (written and written.text), catching_up=todo,
               none=_none_found(path, lang, exclude), blames=blames)
    return EXIT_OK


def _unmatched(repo: str, r: AskResponse, path: str, exclude: tuple[str, ...], typed: str = "") -> list[str]:
    """One line per ``--path`` / ``--exclude`` that names no file of the answered commit's tree
    (``--path utl/ matches no indexed file; nearest: util/``, gitrag.query.prefixes): a typo
    otherwise looks like "nothing relevant".
    ``--path`` is checked only when nothing came back (a result proves it matched); an ``--exclude``
    glob always (it left nothing out). A tree that cannot be read (a team answer's commit not
    fetched here) says nothing: the answer stands without it. ``typed``: ``--path`` as given, for the line."""
    if not ((path and not r.results) or exclude) or r.freshness is None or not r.freshness.commit:
        return []
    from gitrag.index.store.base import SearchFilter
    from gitrag.query import prefixes

    paths = tree_paths(repo, str(r.freshness.commit))
    if paths is None:
        return []
    out = []
    said = prefixes.unmatched(paths, path, f"--path {_printable(typed or path)}") if path and not r.results else None
    if said:
        out.append(said)
    for glob in exclude:
        one = SearchFilter(exclude=(glob,))
        if not any(one.excludes(p) for p in paths):
            out.append(f"--exclude {_printable(glob)} matches no indexed file")
    return out


def tree_paths(repo: str, commit: str) -> list[str] | None:
    """Every file path of ``commit``'s tree (as the index spells them), or None when the tree
    cannot be read (a team answer's commit not fetched here): for hints, which then say nothing."""
    from gitrag.git.repo import GitRepo

    try:
        return [e.path for e in GitRepo(repo).files(commit)]
    except Exception:  # noqa: BLE001 - a hint only
        return None


def _revived(repo: str) -> bool:
    """Whether a daemon now runs for ``repo`` because this call started it: only for an installed
    repository (gitrag.daemon.revive); one that cannot be started is one line on stderr, and the
    answer comes from this process with the freshness line saying how to start it."""
    from gitrag.daemon import revive
    from gitrag.git.repo import GitRepo

    try:
        if not revive.wanted(GitRepo(repo).common_dir):
            return False
    except Exception:  # noqa: BLE001 - not a repository: the in-process ask says so in its own words
        return False
    try:
        pid, how = revive.start()
    except GitragError as exc:
        output.info(f"could not start the gitrag daemon: {exc}")
        return False
    output.info(revive.started_line(pid, how))
    return True


def _no_daemon_hint(repo: str) -> str | None:
    """For an installed repository answered without a daemon (killed, crashed, never
    restarted): say so, since the hooks' events now wait in the spool; None otherwise."""
    from gitrag.daemon import registry
    from gitrag.git.repo import GitRepo

    try:
        installed = registry.is_registered(GitRepo(repo).common_dir)
    except Exception:  # noqa: BLE001 - a hint only: the answer stands without it
        return None
    if not installed:
        return None
    return "the daemon that keeps it current is not running: `gitrag daemon` starts it, `gitrag index` catches up now"


def _in_process(repo: str, question: str, k: int, mode: str, path: str, lang: str, no_answer: bool, expand: int,
                exclude: tuple[str, ...], files: bool, more: dict[str, Any]) -> tuple[AskResponse, Settings, str | None]:
    """The answer from this process's own workspace (no daemon runs): (response, settings,
    catching_up). A damaged store is rebuilt and asked again (gitrag.index.heal); a store held by a
    daemon started since we looked is asked through it, one held by another command is
    waited for (gitrag.index.held). ``more``: worktree (gitrag.query.worktree), offset (paging), rev
    (gitrag.query.revisions)."""
    from gitrag.daemon import routing
    from gitrag.index import heal, held
    from gitrag.index.store import SearchFilter
    from gitrag.index.workspace import open_workspace
    from gitrag.query.retrieval import ask as run_ask

    scope = SearchFilter(path, lang, exclude) if (path or lang or exclude) else None

    def attempt() -> routing.Routed:
        ws = open_workspace(repo, create=False)  # a repository never indexed: NotIndexed, nothing written
        try:
            if more["rev"]:
                return routing.Routed(heal.answering(ws, lambda: _ask_revision(
                    ws, more["rev"], question, k=k, mode=mode, scope=scope, expand=expand, files=files,
                    offset=more["offset"])), ws.settings)
            return routing.Routed(heal.answering(ws, lambda: run_ask(
                ws, question, k=k, mode=mode, scope=scope, expand=expand, files=files,
                worktree_overlay=more["worktree"], offset=more["offset"])), ws.settings)
        finally:
            ws.close()

    response, settings, catching_up = held.until_free(
        attempt, lambda: routing.ask(repo, question, k, mode, path, lang, no_answer, expand,
                                     exclude=exclude, files=files, **more),
        lambda: output.info("the index is open in another gitrag process; waiting for it"))
    return response, settings, catching_up


def _team(repo: str, question: str, k: int, mode: str, path: str, lang: str, expand: int, exclude: tuple[str, ...],
          files: bool, offset: int) -> tuple[AskResponse, Settings, None] | None:
    """The answer from the team server (gitrag.query.team) when ``team_url`` is set (user config or
    environment only: a repository's file never sets it), else None."""
    from gitrag import config

    if not config.load_settings().team_url:
        return None
    from gitrag.index.store import SearchFilter
    from gitrag.index.workspace import open_workspace
    from gitrag.query import team

    scope = SearchFilter(path, lang, exclude) if (path or lang or exclude) else None
    ws = open_workspace(repo)
    try:
        got = team.ask(ws, ws.settings, question, output.info, k=k, mode=mode, scope=scope, expand=expand, files=files,
                       offset=offset)
    finally:
        ws.close()
    return (got, ws.settings, None) if got is not None else None


def _blames(repo: str, r: AskResponse) -> list[dict | None]:
    """``ask --blame``: per result, the last commit that changed its lines (gitrag.query.blame)."""
    from gitrag.git.repo import GitRepo
    from gitrag.query.blame import blame_results

    git = GitRepo(repo)
    seen = blame_results(git, r.freshness.commit, list(dict.fromkeys((res.path, res.start_line, res.end_line)
                                                                     for res in r.results)))
    return [seen[(res.path, res.start_line, res.end_line)] for res in r.results]


def _ask_revision(ws: Any, rev: str, question: str, **kw: Any) -> AskResponse:
    """``ask --rev`` in-process: the revision view is a sync, so it takes the index lock."""
    from gitrag.index import lock as index_lock
    from gitrag.query import revisions

    with index_lock.held(ws.data_dir, lambda pid: output.info(index_lock.waiting_notice(pid))):
        return revisions.ask(ws, rev, question, **kw)


def _answer(settings: Settings, r: AskResponse, no_answer: bool, as_json: bool) -> Answer | None:
    """The written answer, streamed to stdout unless ``as_json``; None when no model is asked
    (``--no-answer`` or none configured: then the answer writer is not even imported). A
    chat failure is one line on stderr and ``answer_error`` in JSON; the exit code stays 0
    because the ranked citations, printed either way, are the primary product."""
    if no_answer or not settings.chat_model:
        if not no_answer and not as_json:
            _chat_hint()
        return None
    from gitrag.query.answer import weak_message, write_answer

    def stream(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    written = write_answer(settings, r.question, r.results, r.mode, on_text=None if as_json else stream)
    if not as_json and written.text:
        stream("\n\n")
    if written.strength is not None and written.strength.weak and not as_json:
        output.line(weak_message(r.question, written.strength))
    if written.error and not as_json:
        output.error(written.error)
    return written


CHAT_HINT_MARKER = "chat-model-hint"  # in the state folder: its mtime is when the hint was last shown
CHAT_HINT_EVERY_S = 24 * 3600


def _chat_hint() -> None:
    """The GITRAG_CHAT_MODEL hint on stderr: only when stdout and stderr are a terminal (never
    into a pipe, a file or an agent's capture), and at most once a day per GITRAG_HOME (the
    marker file ``state/chat-model-hint``; a state folder that cannot be written shows it each time)."""
    from gitrag import config

    if not (sys.stdout.isatty() and sys.stderr.isatty()):
        return
    marker = config.state_dir() / CHAT_HINT_MARKER
    try:
        if time.time() - marker.stat().st_mtime < CHAT_HINT_EVERY_S:
            return
    except OSError:
        pass  # never shown here
    output.info("hint: set GITRAG_CHAT_MODEL (an Ollama chat model, e.g. llama3.2) for a written answer with citations"
                " (shown once a day)")
    try:
        config.private_mkdir(marker.parent)
        marker.touch()  # an old marker: its mtime moves to now
    except (OSError, GitragError):
        pass


def _none_found(path: str, lang: str, exclude: tuple[str, ...]) -> str:
    """What to print for no results: with filters, which ones (they may have left out everything)."""
    given = [f"--path {path}"] if path else []
    given += [f"--lang {lang}"] if lang else []
    given += [f"--exclude {glob}" for glob in exclude]
    if not given:
        return "no results"
    return (f"no results with {' '.join(given)}: --path is a prefix of repository-relative paths, --lang a "
            f"language name as in the results (python, javascript, markdown, text, ...)")


WORKTREE_MARK = "[work tree]"
UNINDEXED_MARK = "[in HEAD, not indexed yet]"


def _print(r: AskResponse, snippets: bool = True, catching_up: str | None = None, none: str = "no results",
           blames: list[dict | None] | None = None) -> None:
    """The ranked results and the freshness line; a work-tree result is marked WORKTREE_MARK, or
    UNINDEXED_MARK when it is HEAD's code not indexed yet (``in_head``, set where it was searched)."""
    if not r.results:
        output.line(none)
    for i, res in enumerate(r.results, r.offset + 1):
        via: tuple[Any, ...] = ("  ", (f"(used by {res.expanded_from})", "dim")) if res.expanded_from else ()
        if res.source == "worktree":
            via += ("  ", (UNINDEXED_MARK if res.in_head else WORKTREE_MARK, "yellow"))
        output.line((f"{i:>2}. {quoting.quote(res.path)}:{res.start_line}-{res.end_line}", "bold"),
                    f"  {_printable(res.symbol)}  ", (f"{res.score:.4f}", "dim"), *via)
        if blames is not None and blames[i - 1 - r.offset] is not None:
            b = blames[i - 1 - r.offset]
            output.line("      ", (f"last changed {b['date'][:10]} {b['commit'][:12]} {_printable(b['author'])}: "
                                    f"{_printable(b['subject'])}", "dim"))
        lines = res.snippet.splitlines() if snippets else []
        for text in lines[:8]:
            output.line("      " + text)
        if len(lines) > 8:
            output.line("      ", (f"… {len(lines) - 8} more lines", "dim"))
    _print_freshness(r, catching_up)


def _print_freshness(r: AskResponse, catching_up: str | None = None) -> None:
    f = r.freshness
    if r.revision:
        output.line((f"revision {_printable(r.revision)} ({str(f.commit)[:12]}): answered from that commit's "
                     f"tree; {_printable(f.branch)} is checked out", "dim"))
        return
    if r.team:
        t = r.team
        ahead = (f"; HEAD is {t['commits_ahead']} commit(s) ahead, " if t["commits_ahead"] else "; ")
        local = "local changes searched from this clone" if t["local_overlay"] else "no local changes"
        output.line((f"{f.branch}: answered from the team server ({_printable(t['published_branch'])} published at "
                     f"{str(t['published_commit'])[:12]}){ahead}{local}", "dim"))
        return
    if f.up_to_date:
        state = "up to date"
    elif f.commit is None:  # a first index not finished (interrupted, or the daemon's under way): its batches so far
        state = (f"answered from a partial index (its first index has not finished, HEAD {str(f.head)[:12]}): "
                 f"{catching_up or 'run `gitrag index` to finish it (it goes on from where it stopped)'}")
    else:
        state = (f"answered from the index at {str(f.commit)[:12]}, an older commit than HEAD ({str(f.head)[:12]}): "
                 f"{catching_up or 'run `gitrag index`'}")
    extra = f"; {f.worktree_changes} work-tree file(s) changed, not indexed" if f.worktree_changes else ""
    if r.worktree and r.worktree.get("searched") and f.worktree_changes:
        extra = f"; {f.worktree_changes} work-tree file(s) changed, searched from the work tree"
        if r.worktree.get("truncated"):  # over the overlay's file budget: say what was left out
            # the budget is fixed (worktree.MAX_FILES) and `gitrag index` reads commits only: say what works
            extra += f" ({r.worktree['truncated']} of them not searched: over the overlay's budget of " \
                     f"{r.worktree.get('files', 0)} files; commit them (or .gitignore untracked ones), or ask " \
                     f"with --committed to leave the work tree out)"
    if r.worktree and r.worktree.get("late"):  # mid-sync: HEAD's files not indexed yet, past the ask's wait
        extra += f"; {r.worktree['late']} file(s) committed since the index not searched yet (over the ask's wait)"
    output.line((f"{f.branch}: {state}{extra}", "dim"))


def _print_files(r: AskResponse, catching_up: str | None = None, none: str = "no results") -> None:
    """Ranked files, each with its best chunks' lines, symbol and score."""
    if not r.files:
        output.line(none)
    for i, hit in enumerate(r.files or [], 1):
        more = ("  ", (f"({hit.matches} matching chunks)", "dim")) if hit.matches > 1 else ()
        output.line((f"{i:>2}. {quoting.quote(hit.path)}", "bold"), "  ", (f"{hit.score:.4f}", "dim"), *more)
        for c in hit.chunks:
            output.line(f"      {c.start_line}-{c.end_line}  {_printable(c.symbol)}  ", (f"{c.score:.4f}", "dim"))
    _print_freshness(r, catching_up)


def _printable(text: str) -> str:
    """``text`` on one line: control characters (a newline in a file name) escaped."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text
