"""Exceptions and exit codes: the one place where they are defined.

Library code raises a subclass of :class:`GitragError` with a message that says what to
do; only the CLI (``gitrag/surfaces/cli.py``) turns them into exit codes:
0 success, 1 user-facing error, 2 bad usage, 3 unexpected internal error, 130 interrupt.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPT = 130


class GitragError(Exception):
    """A user-facing error: the message is one line saying what happened and what to do."""

    exit_code = EXIT_ERROR


class NotARepository(GitragError):
    """The path is not inside a git repository."""


class UnsupportedPath(GitragError):
    """A repository folder whose path is not valid UTF-8 (gitrag keys its index by it)."""


class UnsupportedRepository(GitragError):
    """A repository gitrag's git library cannot read (a sha256 object format, for one)."""


class EmptyRepository(GitragError):
    """The repository (or branch) has no commit yet."""


class BranchGone(GitragError):
    """A branch asked for by name has no ref any more (deleted since a hook reported it)."""


class EmbedderUnavailable(GitragError):
    """The embedder cannot be reached or loaded (dead Ollama, model not pulled, ...)."""


class EmbedderError(GitragError):
    """The embedder answered, but not with usable vectors for some input."""


class EmbedderMismatch(GitragError):
    """The index was built with another embedder; vectors of two embedders never mix."""


class StoreError(GitragError):
    """The vector store failed (disk full, server down, corrupt collection)."""


class StoreDamaged(StoreError):
    """The store's files fail: the engine cannot read them, or what it returns fails its
    checks (a payload digest, a dense vector unlike the vector cache's). Everything in the
    store is derived from git and the vector cache: :mod:`gitrag.index.heal` rebuilds it."""


class StoreHeld(StoreError):
    """The embedded store (a collection's shard) is open in another process: the daemon, or
    another gitrag command. Typed, so callers route or wait on it instead of matching text."""


class StateError(GitragError):
    """The SQLite state is missing, corrupt or from an incompatible gitrag version."""


class NotIndexed(GitragError):
    """The branch has not been indexed yet."""


class ConfigError(GitragError):
    """A configuration value is invalid."""


class NotWritable(GitragError):
    """A folder gitrag must write (GITRAG_HOME, or the XDG data/state/runtime folders) is
    read-only or not the user's to write."""


class TeamBusy(GitragError):
    """Another writer holds the team collection's lease (docs/team.md): one publisher at a time."""


class TeamUnavailable(GitragError):
    """The team server cannot be used for this question (unreachable, refused, nothing
    published for this branch and embedder): the caller falls back to the local index."""


class TeamPartsGone(StoreError):
    """A team branch record names manifest parts that are not (or no longer) on the server:
    a publish switched generations while a reader read (it reads again), or the records
    are damaged (the writer publishes again)."""
