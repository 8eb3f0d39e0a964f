"""Route a CLI command through the daemon when one runs; ``None`` means "do it in-process".

The daemon holds the repository's store open (an embedded store's shard can be open in
one process at a time), so while it runs, ``ask`` and ``status`` must go through it; it
also answers from a warm model. No daemon -> None, and the caller works in-process.
``ask`` and ``index`` send this process's result settings (GITRAG_EMBEDDER, ...): a
daemon running with others refuses them (SettingsMismatch) instead of silently answering
with its own.

This is the route of every command while a daemon runs, so it imports the standard
library, the client and the settings only: the work tree is found by looking for ``.git``
(:func:`workdir`, pygit2 only when that is not plain), and the response is rebuilt as
:mod:`gitrag.query.results` dataclasses; no numpy, store, ranking or git bindings are loaded.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

from gitrag.daemon import catchup, client, handshake

ASK_TIMEOUT_S = 300.0  # a cold daemon loads the model on the first question
STATUS_TIMEOUT_S = 60.0
PROGRESS_TIMEOUT_S = 5.0  # the daemon answers it from memory, opening nothing


def _request(op: str, timeout: float | None, **args: Any) -> Any | None:
    """The daemon's result, or None when no daemon runs. A ping first (gitrag.daemon.handshake):
    a stopped daemon, or one of another gitrag, is one line in a few seconds (DaemonStuck,
    DaemonVersion), never a long silence or an unknown-argument error."""
    if handshake.check() is None:
        return None
    try:
        return client.request(op, timeout=timeout, **args)
    except client.ConnectError:
        return None


_GIT_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM")


def workdir(repo: str) -> Path | None:
    """The work tree root of the repository holding ``repo`` (resolved), as
    ``GitRepo(repo).workdir``: the nearest folder at or above it with a ``.git`` folder or
    file. Only when git's discovery is not that plain (a ``GIT_DIR``-style variable is set,
    no ``.git`` is found, a bare repository, a path that is not UTF-8) is the answer
    pygit2's, and its errors (NotARepository) are raised. Costs a few ``stat`` calls instead
    of importing pygit2 (~45 ms of every client command)."""
    start = Path(repo).absolute()
    if not any(os.environ.get(v) for v in _GIT_ENV):
        try:
            here = start.resolve(strict=True)
            str(here).encode("utf-8")
        except (OSError, UnicodeEncodeError):
            here = None
        while here is not None:
            dot = here / ".git"
            if dot.is_dir() and (dot / "HEAD").is_file() or dot.is_file():
                return here
            here = here.parent if here.parent != here else None
    from gitrag.git.repo import GitRepo

    return GitRepo(repo).workdir


def _settings(repo: str) -> dict[str, Any]:
    """This process's RESULT_SETTINGS for ``repo``: the daemon refuses a request whose
    settings differ from its own (it would answer with its own embedder, silently)."""
    from gitrag import config

    return config.result_settings(config.load_settings(workdir(repo)))


def held_elsewhere(exc: BaseException) -> bool:
    """Whether ``exc`` says the embedded store is open in another process (a daemon that
    started after this command looked for one): then the command asks through it."""
    from gitrag.errors import StoreHeld

    return isinstance(exc, StoreHeld)


class Routed(NamedTuple):
    """The daemon's answer: the response, the repository's settings (for writing an answer
    in-process) and, when the index is behind and the daemon is on it, what it is doing."""

    response: Any
    settings: Any
    catching_up: str | None = None


def ask(repo: str, question: str, k: int, mode: str, path: str, lang: str, no_answer: bool,
        expand: int = 0, *, exclude: tuple[str, ...] = (), files: bool = False, worktree: bool = True,
        offset: int = 0, rev: str = "") -> Routed | None:
    """The daemon's answer (:class:`Routed`), or None when no daemon runs. ``exclude``
    (globs) and ``files`` are sent only when set, so an older daemon still answers plain
    asks. Raises CommandError (the daemon's error, e.g. NotIndexed, SettingsMismatch),
    Timeout, UntrustedSocket, NotARepository."""
    from gitrag import config

    extra: dict[str, Any] = {}
    if exclude:
        extra["exclude"] = list(exclude)
    if files:
        extra["files"] = True
    if os.environ.get("GITRAG_ASK_WAIT"):  # sent only when set: the daemon's own default otherwise
        extra["wait"] = catchup.ask_wait()
    if not worktree:
        extra["worktree"] = False  # the daemon searches the work tree too unless told not to
    if offset:
        extra["offset"] = offset
    if rev:
        extra["rev"] = rev
    settings = config.load_settings(workdir(repo))  # read once: sent (result settings), then returned
    data = _request("ask", ASK_TIMEOUT_S, repo=str(Path(repo).absolute()), question=question, k=k, mode=mode,
                    path=path, lang=lang, no_answer=no_answer, expand=expand,
                    settings=config.result_settings(settings), **extra)
    if data is None:
        return None
    return Routed(response_from_json(data), settings, data.get("catching_up"))


def related(repo: str, **args: Any) -> dict[str, Any] | None:
    """``gitrag related``'s JSON from the daemon (``args``: location, k, path, lang, exclude,
    worktree, offset), or None when no daemon runs. Raises CommandError, Timeout."""
    return _request("related", ASK_TIMEOUT_S, repo=str(Path(repo).absolute()), settings=_settings(repo), **args)


def status(repo: str) -> dict[str, Any] | None:
    """The contract's status JSON from the daemon, or None when no daemon runs. This
    process's settings are judged first, as with no daemon (ConfigError)."""
    _settings(repo)
    return _request("status", STATUS_TIMEOUT_S, repo=str(Path(repo).absolute()))


def index(repo: str, rebuild: bool = False) -> dict[str, Any] | None:
    """The contract's index JSON from a sync run by the daemon, or None when no daemon runs."""
    return _request("index", None, repo=str(Path(repo).absolute()), rebuild=rebuild, settings=_settings(repo))


def progress(repo: str) -> dict[str, Any] | None:
    """What the daemon is doing for ``repo`` now (``{"catching_up", "stage", "done", "total",
    "seconds"}``, see ``Service.cmd_progress``), or None when no daemon runs or it cannot say
    (a daemon older than the op, no answer within PROGRESS_TIMEOUT_S): progress is never
    worth an error."""
    from gitrag.errors import GitragError

    try:
        data = client.request("progress", timeout=PROGRESS_TIMEOUT_S, repo=str(Path(repo).absolute()))
    except GitragError:
        return None
    return data if isinstance(data, dict) else None


def gc(repo: str) -> dict[str, Any] | None:
    """The gc result from the daemon, or None when no daemon runs (settings judged first, as in status)."""
    _settings(repo)
    return _request("gc", None, repo=str(Path(repo).absolute()))


def integrity(repo: str, deep: bool) -> dict[str, Any] | None:
    """``doctor``'s integrity check run by the daemon, which holds the store open
    (``Service.cmd_integrity``), or None when no daemon runs. Raises CommandError (a daemon
    older than the op: kind ``UnknownOp``, or the check's own error), Timeout."""
    return _request("integrity", None, repo=str(Path(repo).absolute()), deep=deep)


def release(repo: str) -> bool:
    """Ask a running daemon to close the repository's store (see ``Service.cmd_release``);
    True when it did or no daemon runs. A daemon older than the op: False."""
    try:
        data = _request("release", STATUS_TIMEOUT_S, repo=str(Path(repo).absolute()))
    except client.CommandError:
        return False
    return data is None or bool(data.get("released"))


def response_from_json(data: dict[str, Any]) -> Any:
    """An AskResponse rebuilt from its ``to_json()`` (unknown result fields ignored)."""
    from dataclasses import fields

    from gitrag.query.file_results import FileHit
    from gitrag.query.results import AskResponse, Freshness, Result

    names = {f.name for f in fields(Result)}
    results = [Result(**{k: v for k, v in r.items() if k in names}) for r in data.get("results", [])]
    fresh = Freshness(data["branch"], data.get("commit"), data.get("head"), int(data.get("worktree_changes", 0)))
    files = [FileHit.from_json(f) for f in data["files"]] if isinstance(data.get("files"), list) else None
    out = AskResponse(data["question"], fresh, results, data.get("answer"), data.get("mode", "hybrid"), files)
    out.offset, out.worktree, out.revision = int(data.get("offset", 0)), data.get("worktree"), data.get("revision")
    return out
