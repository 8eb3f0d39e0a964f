"""The command line: parses arguments and dispatches to ``gitrag.surfaces.commands``; nothing else.

Errors become exit codes in one place, ``gitrag.surfaces.exits`` (see ``gitrag.errors``);
the process starts in ``gitrag.surfaces.entry``, which hands every command but the hot
``ask`` form (``gitrag.surfaces.args.quick_ask``) to click here.
"""

from __future__ import annotations

import sys

import click

from gitrag import __version__
from gitrag.errors import BadUsage, GitragError
from gitrag.query.results import MAX_K
from gitrag.surfaces.args import repo_path as _repo_path
from gitrag.surfaces.args import text as _text
from gitrag.surfaces.exits import run as _exit

REPO = click.option("--repo", default=".", show_default=True, help="Any path inside the git repository.")
JSON = click.option("--json", "as_json", is_flag=True, help="Print one JSON object for programs (every field: README, \"JSON output\").")


class _RankingStage(click.Choice):
    """``--ablate``'s choices: the names of ``gitrag.query.ranking.pipeline.STAGES``, imported only when
    the option is parsed or ``eval --help`` is shown, so that no other command (the hook path
    ``gitrag notify`` included) pays for importing the ranking package at start-up."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        from gitrag.query.ranking.pipeline import STAGES

        return tuple(STAGES)

    @choices.setter
    def choices(self, _value: object) -> None:
        """``click.Choice.__init__`` assigns the choices; they are always read from STAGES."""


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="gitrag")
@click.option("-v", "--verbose", count=True, help="More log output on stderr (-v info, -vv debug).")
def cli(verbose: int) -> None:
    """gitrag keeps a semantic code index of a git repository current from git's own events,
    and answers questions about the code with ranked, citable locations.

    \b
    Quick start, inside a repository:
      gitrag index                         # index the current branch (incremental after the first run)
      gitrag ask "where are retries configured?"
      gitrag install                       # keep it current from git hooks and a background daemon

    Configuration: GITRAG_* environment variables, .gitrag.toml in the repository, or
    ~/.config/gitrag/config.toml (or the file GITRAG_CONFIG names; see README).
    """
    from gitrag import logs

    logs.configure_when_used(["warning", "info", "debug"][min(verbose, 2)])


@cli.command()
@REPO
@JSON
@click.option("--rebuild", is_flag=True, help="Drop this branch's index and build it again (e.g. after changing the embedder).")
@click.option("--publish", is_flag=True,
              help="Then write the branch's index to the team server (team_url, role writer; docs/team.md): for a CI job.")
@click.option("--wait", "wait_s", type=click.FloatRange(min=0), default=0.0, show_default=True, metavar="SECONDS",
              help="With --publish: seconds to wait while another writer holds the team lease (0: refuse at once).")
@click.option("--as-branch", "as_branch", default="", metavar="NAME",
              help="With --publish: publish under this branch name (a CI job on a detached HEAD: the branch it built).")
def index(repo: str, as_json: bool, rebuild: bool, publish: bool, wait_s: float, as_branch: str) -> None:
    """Bring the current branch's index up to HEAD.

    Reads the committed tree from git's object database (not the work tree), chunks the
    files that changed since the last indexed commit, embeds only chunks never embedded
    before, and updates the branch's collection. A second run with nothing changed
    embeds nothing.

    --publish (a team's CI job): after the sync, copy the branch's points, manifest and
    symbol graph to the team server under a lease, so every clone with team_url set
    answers from it without indexing (docs/team.md). Example:

    \b
        GITRAG_TEAM_URL=https://qdrant:6333 GITRAG_TEAM_ROLE=writer gitrag index --publish
    """
    from gitrag.surfaces.commands.index import index as run

    if as_branch and not publish:
        raise click.UsageError("--as-branch goes with --publish")
    _exit(lambda: run(repo, as_json, rebuild, publish=publish, wait_s=wait_s, as_branch=as_branch))


@cli.command()
@click.argument("question")
@REPO
@click.option("-k", "k", default=10, show_default=True, type=click.IntRange(1, MAX_K), help="Number of results.")
@click.option("--mode", type=click.Choice(["hybrid", "dense", "sparse"]), default="hybrid", show_default=True,
              help="hybrid fuses the dense (embedding) and sparse (BM25 terms) lists and ranks them; dense or sparse alone for comparison.")
@click.option("--path", "path", default="", help="Only results under this folder or path prefix: repository-relative, or as the shell gives it (./doc, an absolute path, relative to the current folder).")
@click.option("--lang", "lang", default="", help="Only results in this language: python, javascript, typescript, tsx, go, "
              "rust, java, kotlin, c, cpp, csharp, php, ruby, markdown, rst, ini or text.")
@click.option("--exclude", "exclude", multiple=True, metavar="GLOB", callback=lambda c, p, v: _globs(v),
              help="Leave out paths matching this gitignore-style glob (repeatable), e.g. 'docs/**', '*.md', 'tests/'.")
@click.option("--files", "files", is_flag=True,
              help="Rank files instead of chunks: each file with its best chunks (which files to open).")
@click.option("--no-answer", is_flag=True, help="Only the ranked citations, never a written answer.")
@click.option("--expand", type=click.IntRange(0, 3), default=0, show_default=True, metavar="HOPS",
              help="Also list the definitions the top results call or inherit from, up to HOPS edges away: "
                   "at most -k of them, after the -k results.")
@click.option("--blame", is_flag=True, help="Give each result the last commit that changed its lines (git blame of "
              "the range: commit, date, author, subject).")
@click.option("--committed", is_flag=True, help="Search the indexed commit only; by default uncommitted work-tree "
              "changes (edited, new untracked, deleted, renamed files) are searched too, marked [work tree].")
@click.option("--rev", "rev", default="", metavar="REV",
              help="Answer from this revision's tree (a tag, a commit, HEAD~20): built from the nearest indexed "
                   "commit, embedding only chunks never seen; the work tree is not searched.")
@click.option("--offset", type=click.IntRange(0, 10_000), default=0, show_default=True,
              help="Skip this many of the best results: with -k, a page of the same ranking (offset 10 -k 10: 11-20).")
@JSON
def ask(question: str, repo: str, k: int, mode: str, path: str, lang: str, exclude: tuple[str, ...], files: bool,
        no_answer: bool, expand: int, blame: bool, committed: bool, rev: str, offset: int,
        as_json: bool) -> None:
    """Answer QUESTION with ranked code locations (path:start-end, symbol, score, snippet).

    QUESTION "-" reads the question from stdin (UTF-8, up to end of input): for questions
    too long for a command line (one argument may hold at most 128 KiB) or made by a program
    (`gitrag ask - < FILE`). A question holds at most 500,000 characters, and no NUL.

    \b
    Examples:
      gitrag ask "how are git hooks installed?"
      git diff | gitrag ask - --files          # the files this change relates to
      gitrag ask "_unpack_args" --mode sparse -k 3
      gitrag ask "retry policy" --path src/net/ --json
      gitrag ask "how is the config parsed" --exclude 'docs/**' --exclude '*.md' --files
      gitrag ask "retry policy" --committed     # as of the indexed commit, ignoring uncommitted edits
      gitrag ask "retry policy" --rev v1.0      # as of the tag v1.0
    """
    from gitrag.daemon.protocol import MAX_QUESTION
    from gitrag.surfaces.commands.ask import from_options

    path, exclude = _repo_path(path), tuple(_repo_path(g) for g in exclude)
    params = {"repo": repo, "k": k, "mode": mode, "path": path, "lang": _language(lang), "exclude": exclude,
              "files": files, "no_answer": no_answer, "expand": expand, "blame": blame, "committed": committed,
              "rev": rev, "offset": offset, "as_json": as_json}
    _exit(lambda: from_options({**params, "question": _question(question, MAX_QUESTION)}))


@cli.command("log")
@click.argument("question")
@REPO
@click.option("-k", "k", default=10, show_default=True, type=click.IntRange(1, MAX_K), help="Number of commits.")
@click.option("--path", "path", default="", help="Only commits that changed a path starting with this prefix.")
@JSON
def log_(question: str, repo: str, k: int, path: str, as_json: bool) -> None:
    """Rank the current branch's commits by how well their message and changed paths match QUESTION.

    Answers with commit, date, author, subject and the files it changed. The commit index is
    built by `gitrag index` (and the hooks) with the code index; QUESTION "-" reads stdin.

    \b
    Examples:
      gitrag log "when was retry on timeout added"
      gitrag log "fix unicode error on windows" --path src/ -k 3 --json
    """
    from gitrag.surfaces.commands.log import log as run

    path = _repo_path(path)
    _exit(lambda: run(_question(question), repo, k, path, as_json))


@cli.command()
@click.argument("location", metavar="PATH:LINE")
@REPO
@click.option("-k", "k", default=10, show_default=True, type=click.IntRange(1, MAX_K), help="Number of results.")
@click.option("--path", "path", default="", help="Only results whose path starts with this prefix.")
@click.option("--lang", "lang", default="", help="Only results in this language (as for ask --lang).")
@click.option("--exclude", "exclude", multiple=True, metavar="GLOB", callback=lambda c, p, v: _globs(v),
              help="Leave out paths matching this gitignore-style glob (repeatable).")
@click.option("--committed", is_flag=True, help="Only the indexed commit (by default the work tree's uncommitted "
              "files are searched too, and PATH is read from disk when it is one of them).")
@click.option("--offset", type=click.IntRange(0, 10_000), default=0, show_default=True,
              help="Skip this many of the best results (paging).")
@JSON
def related(location: str, repo: str, k: int, path: str, lang: str, exclude: tuple[str, ...], committed: bool,
            offset: int, as_json: bool) -> None:
    """Rank the code most like the chunk at PATH:LINE (the chunk itself left out).

    The chunk's own embedding and its terms are searched as a question's would be: a copy
    of a function under another name, code that does the same elsewhere, a sibling
    implementation. PATH is repository-relative, LINE counts from 1. A name with a newline,
    a quote or a byte that is not UTF-8 is printed quoted as git prints it ("a\\nb.py",
    "caf\\351.py"), and PATH may be given so (copied from gitrag's output or git status).

    \b
    Examples:
      gitrag related src/app/retry.py:42
      gitrag related src/app/retry.py:42 --path src/ --lang python -k 5 --json
      gitrag related '"docs/caf\\351.md":3'
    """
    from gitrag.surfaces.commands.related import related as run

    lang = _language(lang)
    _exit(lambda: run(_repo_path(location), repo, k, _repo_path(path), lang, tuple(_repo_path(g) for g in exclude),
                      as_json, worktree=not committed, offset=offset))


@cli.command()
@REPO
@JSON
def status(repo: str, as_json: bool) -> None:
    """Show the daemon, each indexed branch's freshness, the embedder, the store and sizes."""
    from gitrag.surfaces.commands.status import status as run

    _exit(lambda: run(repo, as_json))


@cli.command()
@REPO
@JSON
def gc(repo: str, as_json: bool) -> None:
    """Reclaim disk: forget deleted branches, drop collections of branches unused for
    branch_ttl_days (rebuilt from the vector cache, with no embedding, when next used),
    and delete cached vectors no branch references any more."""
    from gitrag.surfaces.commands.gc import gc as run

    _exit(lambda: run(repo, as_json))


@cli.command("eval")
@click.argument("questions", type=click.Path(exists=True, dir_okay=False))
@REPO
@click.option("--mode", "modes", multiple=True, type=click.Choice(["hybrid", "dense", "sparse", "rrf", "grep", "ripgrep"]),
              help="A mode to run; repeat for several. Default: hybrid, dense, sparse and the grep baseline. "
                   "rrf is the store's RRF fusion without the ranking stages; ripgrep is the semble benchmark's baseline.")
@click.option("-k", "k", default=10, show_default=True, type=click.IntRange(1, 100), help="Results per question.")
@click.option("--scope", default=None, help="Only score results under this path prefix (semble files set their own).")
@click.option("--exclude", "exclude", multiple=True, metavar="GLOB", callback=lambda c, p, v: _globs(v),
              help="Leave out paths matching this gitignore-style glob (repeatable), in every mode.")
@click.option("--ablate", "ablate", multiple=True, type=_RankingStage(),
              help="Also run hybrid with this ranking stage switched off, as mode hybrid-STAGE (repeatable).")
@JSON
def eval_(questions: str, repo: str, modes: tuple[str, ...], k: int, scope: str | None, exclude: tuple[str, ...],
          ablate: tuple[str, ...],
          as_json: bool) -> None:
    """Measure retrieval quality on a question set: recall@1/5/10, MRR@10, nDCG@10.

    QUESTIONS is a JSONL file like bench/eval/click-8.1.7.jsonl or a semble benchmark
    JSON file (fastapi.json, flask.json, requests.json). The repository is indexed first
    (incrementally); every mode runs side by side, overall and per question kind.
    """
    from gitrag.surfaces.commands.eval import evaluate

    _exit(lambda: evaluate(questions, repo, modes, k, scope, as_json, ablate, exclude))


@cli.command()
@REPO
@click.option("--systemd/--no-systemd", "systemd", default=None,
              help="Run the daemon as a systemd user service (default: when `systemctl --user` works).")
@click.option("--no-index", is_flag=True, help="Do not run the first index now.")
def install(repo: str, systemd: bool | None, no_index: bool) -> None:
    """Keep this repository's index current: git hooks, a running daemon, the first index.

    Hooks go into the common git dir (so linked worktrees work) or the core.hooksPath
    folder; a hook already there is kept as <name>.legacy and still runs first. Running it
    twice changes nothing; `gitrag uninstall` puts everything back.
    """
    from gitrag.surfaces.commands.install import install as run

    _exit(lambda: run(repo, systemd, not no_index))


@cli.command()
@REPO
def uninstall(repo: str) -> None:
    """Remove gitrag's hooks (restoring the ones they replaced) and forget the repository.

    When no other repository is registered any more, it also removes the systemd user
    unit and stops the daemon. The index data stays (delete the folder `gitrag status`
    names to reclaim it).
    """
    from gitrag.surfaces.commands.install import uninstall as run

    _exit(lambda: run(repo))


@cli.command(context_settings={"allow_extra_args": True})
@click.pass_context
@click.option("--stop", is_flag=True, help="Stop the running daemon (it finishes its current sync) and exit.")
@click.option("--log-level", default="info", show_default=True, type=click.Choice(["debug", "info", "warning", "error"]),
              help="The least severe events the daemon logs on stderr.")
@click.option("--json-logs/--text-logs", default=None, help="Log format on stderr (default: JSON under systemd).")
@click.option("--debounce", default=0.5, show_default=True, type=click.FloatRange(0, 60), help="Seconds to wait for more events.")
@click.option("--reconcile", default=300.0, show_default=True, type=click.FloatRange(1), help="Seconds between full checks.")
@click.option("--orphan", default=600.0, show_default=True, type=click.FloatRange(0),
              help="With no repository registered in its GITRAG_HOME (none installed), stop after this many seconds "
                   "without a request (a daemon an MCP server or `ask` started); 0: never.")
def daemon(ctx: click.Context, stop: bool, log_level: str, json_logs: bool | None, debounce: float,
           reconcile: float, orphan: float) -> None:
    """Run the daemon in the foreground (what the systemd unit runs); see docs/daemon.md.

    \b
      gitrag daemon            run it in the foreground (install starts one in the background)
      gitrag daemon --stop     stop the running daemon
      gitrag status            whether it runs, and each branch's freshness
    """
    from gitrag.surfaces.commands import daemon as cmd

    if ctx.args:  # `gitrag daemon stop`: the forms are options, not subcommands
        raise click.UsageError(_daemon_word(ctx.args), ctx)

    _exit(lambda: cmd.stop() if stop else cmd.daemon(log_level, json_logs, debounce, reconcile, orphan))


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("hook")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def notify(hook: str, args: tuple[str, ...]) -> None:
    """Hand one git hook event to the daemon, or spool it when no daemon answers.

    This is what the installed hooks run; you do not need to. HOOK is the hook's name
    (post-commit, post-checkout, post-merge, post-rewrite, reference-transaction) and ARGS are the arguments git
    passed it; `--after-rebase GITDIR` before HOOK first waits until the rebase in GITDIR
    has ended. It never prints and always exits 0 (failures go to notify.log in the state
    folder), and imports only the standard library.

    \b
    Example (what post-commit does):
      gitrag notify post-commit
    """
    from gitrag.daemon.notify import main as run

    sys.exit(run([hook, *args]))


@cli.command()
@REPO
@JSON
@click.option("--deep", is_flag=True, help="Read the whole store and vector cache and verify every digest, "
              "vector and membership (plain doctor checks a bounded sample).")
def doctor(repo: str, as_json: bool, deep: bool) -> None:
    """Check git, hooks, daemon, embedder, store and index lag; one line each, with the fix."""
    from gitrag.surfaces.commands.doctor import doctor as run

    _exit(lambda: run(repo, as_json, deep=deep))


@cli.command()
@REPO
def mcp(repo: str) -> None:
    """Serve the index to coding agents over MCP (stdio): search_code, find_related, get_symbol,
    get_symbol_dependencies, get_file_outline, index_status.

    \b
    Register it with an MCP client (see docs/mcp.md), for example:
      {"mcpServers": {"gitrag": {"command": "gitrag", "args": ["mcp", "--repo", "/path/to/repo"]}}}
    """
    from gitrag.surfaces.mcp import serve

    _exit(lambda: serve(repo))


def _question(value: str, limit: int | None = None) -> str:
    """QUESTION as a command answers it: ``-`` read from stdin, bytes that are not UTF-8 made
    U+FFFD (``_text``). Raises BadUsage (exit 2, one line) when it is empty, holds a NUL
    character (whichever route answers: the daemon's protocol refuses one, so this process
    refuses it too) or is longer than ``limit`` characters."""
    question = _text(_stdin_text() if value == "-" else value)
    if not question.strip():
        raise BadUsage("the question is empty")
    if "\0" in question:
        raise BadUsage(f"the question holds a NUL character (character {question.index(chr(0)) + 1:,}); a question "
                       "is text: remove it (`tr -d '\\000'` drops them from a piped file)")
    if limit is not None and len(question) > limit:
        raise BadUsage(f"the question is {len(question):,} characters long; at most {limit:,}: shorten it, or pass "
                       f"a file's first {limit:,} bytes (`head -c {limit} FILE | gitrag ask -`)")
    return question


def _stdin_text() -> str:
    """All of stdin as text: UTF-8, a byte that is not UTF-8 kept as a surrogate escape
    (``_text`` makes it U+FFFD, as for argv)."""
    return sys.stdin.buffer.read().decode("utf-8", "surrogateescape")


def _language(value: str) -> str:
    """``--lang``, lower-cased; a usage error (exit 2) listing the known names when it is none
    of the languages files are indexed as (``gitrag.index.chunking.languages.LANGUAGES``)."""
    lang = value.strip().lower()
    if lang:
        from gitrag.index.chunking.languages import LANGUAGES

        if lang not in LANGUAGES:
            raise click.BadParameter(f"unknown language {value!r}; known: {', '.join(LANGUAGES)}", param_hint="--lang")
    return lang


def _globs(globs: tuple[str, ...]) -> tuple[str, ...]:
    """``--exclude`` values, checked now so a bad glob is a usage error (exit 2)."""
    if globs:
        from gitrag.index.store import SearchFilter

        try:
            SearchFilter(exclude=globs)
        except GitragError as exc:
            raise click.BadParameter(str(exc), param_hint="--exclude") from None
    return globs


_DAEMON_FORMS = {"stop": "gitrag daemon --stop", "kill": "gitrag daemon --stop", "status": "gitrag status",
                 "start": "gitrag daemon", "run": "gitrag daemon", "restart": "gitrag daemon --stop` then `gitrag daemon"}


def _daemon_word(words: list[str]) -> str:
    """The usage error for words after ``gitrag daemon``: what was meant, when it can tell."""
    meant = _DAEMON_FORMS.get(words[0].lower())
    got = f"got unexpected extra argument{'s' if len(words) > 1 else ''} ({' '.join(words)})"
    if meant:
        return f"{got}: did you mean `{meant}`?"
    return f"{got}: the forms are `gitrag daemon`, `gitrag daemon --stop` (and `gitrag status`)"
