"""Exceptions and exit codes: the one place where they are defined.

Library code raises a subclass of :class:`GitragError` with a message that says what to
do; only ``gitrag/surfaces/exits.py`` turns them into exit codes:
0 success, 1 user-facing error, 2 bad usage (click's own errors, and :class:`BadUsage`), 3 unexpected
internal error, 130 interrupt.
The daemon sends a GitragError across its socket as data (its class name as ``kind``, its
``exit_code``), and the client raises it again as a :class:`CommandError`.

The tree (tests/test_errors.py checks that it is the classes' own)::

    Exception
    ├── GitragError                 user-facing: one line, what happened and what to do; exit 1
    │   ├── BadUsage                a command's argument is malformed: exit 2
    │   ├── NotARepository          git and the repository
    │   ├── UnsupportedPath
    │   ├── UnsupportedRepository
    │   ├── UnsupportedBranch
    │   ├── EmptyRepository
    │   ├── BranchGone
    │   ├── InstallError
    │   ├── ConfigError             settings and the data folders
    │   ├── NotWritable
    │   ├── EmbedderUnavailable     the index: embedders, store, state
    │   ├── EmbedderError
    │   ├── EmbedderMismatch
    │   ├── StoreError
    │   │   ├── StoreDamaged
    │   │   ├── StoreHeld
    │   │   └── TeamPartsGone
    │   ├── StateError
    │   │   └── DiskFull
    │   ├── NotIndexed
    │   ├── NotFound
    │   ├── UnknownRevision         questions and answers
    │   ├── AnswerUnavailable
    │   ├── DatasetError
    │   ├── DaemonError             the daemon, seen from a client
    │   │   ├── ConnectError
    │   │   ├── Timeout
    │   │   ├── CommandError
    │   │   └── UntrustedSocket
    │   ├── DaemonStuck
    │   ├── DaemonVersion
    │   ├── UnsafeFolder            the daemon itself
    │   ├── AlreadyRunning
    │   ├── SocketInUse
    │   ├── SettingsMismatch
    │   ├── SystemdError
    │   ├── ToolInputError          the MCP server
    │   ├── TeamBusy                the team server
    │   └── TeamUnavailable
    ├── ProtocolError               a line on the daemon's socket that is not this protocol
    └── ValueError
        └── BadArguments            a request argument of the wrong type or range

ProtocolError and BadArguments never reach a user as such: the daemon answers them as data
(``kind`` ProtocolError / BadArguments). A module may keep a private exception (``_Damaged``,
``_Rejected``) that never leaves it. Standard library only: the hook path imports this.
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


class BadUsage(GitragError):
    """An argument a command cannot parse (``related`` given no ``:LINE``): bad usage, exit 2 as
    click's own usage errors, but one line like every other error."""

    exit_code = EXIT_USAGE


class NotARepository(GitragError):
    """The path is not inside a git repository."""


class UnsupportedPath(GitragError):
    """A repository folder whose path is not valid UTF-8 (gitrag keys its index by it)."""


class UnsupportedRepository(GitragError):
    """A repository gitrag's git library cannot read (a sha256 object format, for one)."""


class UnsupportedBranch(GitragError):
    """The checked-out branch's name is not valid UTF-8: gitrag keys a branch's index, its
    state and its daemon messages by the name, so it does not index that branch."""


class EmptyRepository(GitragError):
    """The repository (or branch) has no commit yet."""


class BranchGone(GitragError):
    """A branch asked for by name has no ref any more (deleted since a hook reported it)."""


class InstallError(GitragError):
    """A hook cannot be installed or removed without losing someone else's file."""


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


class DiskFull(StateError):
    """SQLite could not write ``path`` ("database or disk is full", "disk I/O error"):
    ``cause`` is SQLite's words. Typed, so ``gitrag gc`` (which frees space) can say what it
    did and could not do instead of the indexer's advice."""

    def __init__(self, message: str, path: str = "", cause: str = "") -> None:
        super().__init__(message)
        self.path, self.cause = path, cause


class NotIndexed(GitragError):
    """The branch has not been indexed yet."""


class ConfigError(GitragError):
    """A configuration value is invalid."""


class NotWritable(GitragError):
    """A folder gitrag must write (GITRAG_HOME, or the XDG data/state/runtime folders) is
    read-only or not the user's to write."""


# --- the index ---------------------------------------------------------------------------

class NotFound(GitragError):
    """A path or symbol the current branch's index does not hold."""


# --- questions and answers -------------------------------------------------------------

class UnknownRevision(GitragError):
    """A revision git cannot resolve to a commit."""


class AnswerUnavailable(GitragError):
    """The chat model could not be asked (server down, model missing, timeout)."""


class DatasetError(GitragError):
    """A question file is missing or malformed; the message names the file and place."""


# --- the daemon, seen from a client (gitrag.daemon.client) -------------------------------

class DaemonError(GitragError):
    """Base of every failure to get an answer from the daemon."""


class ConnectError(DaemonError):
    """No daemon listens on the socket (missing, refused, or not a socket)."""


class Timeout(DaemonError):
    """Connected, but no complete reply within the timeout."""


class CommandError(DaemonError):
    """The daemon answered ``ok: false``; ``kind`` is its exception class name."""

    def __init__(self, message: str, kind: str = "Error", exit_code: int = 1) -> None:
        super().__init__(message)
        self.kind = kind
        self.exit_code = exit_code


class UntrustedSocket(DaemonError):
    """The socket, its folder or the process listening on it is not this user's: nothing is
    sent (someone else may be posing as the daemon in a shared /tmp)."""


class DaemonStuck(GitragError):
    """A daemon listens but does not answer a ping in time."""


class DaemonVersion(GitragError):
    """The running daemon is another gitrag than this client."""


# --- the daemon itself -------------------------------------------------------------------

class UnsafeFolder(GitragError):
    """The socket folder is not a private folder of this user (a shared /tmp squatted)."""


class AlreadyRunning(GitragError):
    """Another daemon holds the lock."""


class SocketInUse(GitragError):
    """A live daemon answers on the socket path: it is never taken over."""


class SettingsMismatch(GitragError):
    """A client's result settings differ from the daemon's (see Service.check_settings)."""


class SystemdError(GitragError):
    """``systemctl --user`` failed, or a value cannot be written into a unit."""


# --- the MCP server ----------------------------------------------------------------------

class ToolInputError(GitragError):
    """A tool argument gitrag refuses (an absolute path, ``..``)."""


# --- the daemon's wire (gitrag.daemon.protocol): answered as data, never shown as such ---

class ProtocolError(Exception):
    """A line that is not one JSON object of this protocol version, or is too long."""


class BadArguments(ValueError):
    """A request argument of the wrong type or out of range (the reply's kind ``BadArguments``)."""


# --- the team server (docs/team.md) -----------------------------------------------------

class TeamBusy(GitragError):
    """Another writer holds the team collection's lease (docs/team.md): one publisher at a time."""


class TeamUnavailable(GitragError):
    """The team server cannot be used for this question (unreachable, refused, nothing
    published for this branch and embedder): the caller falls back to the local index."""


class TeamPartsGone(StoreError):
    """A team branch record names manifest parts that are not (or no longer) on the server:
    a publish switched generations while a reader read (it reads again), or the records
    are damaged (the writer publishes again)."""
