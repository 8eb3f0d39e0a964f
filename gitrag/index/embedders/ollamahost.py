"""Where the Ollama server is and how a client reaches it: one reading of ``ollama_host``
for both embeddings (``gitrag.index.embedders.ollama``) and written answers (``gitrag.query.answer``).

* :func:`parse_host` reads the value as Ollama's ``OLLAMA_HOST`` is written (``host``,
  ``host:port``, ``:port``, ``0.0.0.0:11434``, ``http(s)://host[:port][/path]``) and
  gives ``scheme://host:port[/path]``, or raises ConfigError (one line) for another scheme
  or a port outside 1-65535.
* :func:`client` makes the ``ollama.Client`` for it: connecting may take at most
  :data:`CONNECT_S` seconds, an answer ``read_s``; a server on this machine (loopback, or
  the unspecified ``0.0.0.0``/``::`` that an ``OLLAMA_HOST`` for ``ollama serve`` often
  names) is reached directly, never through an ``HTTP(S)_PROXY``/``ALL_PROXY`` of the
  environment, which is honoured for other hosts.
* :func:`model_names`: the models the server has pulled (``GET /api/tags``), reached the
  same way (``gitrag doctor`` asks it).

Standard library only at import time (``ollama`` and ``httpx`` are imported by
:func:`client`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from gitrag.errors import ConfigError

DEFAULT_PORT = 11434
CONNECT_S = 5.0  # a reachable server accepts at once; a black-holed address fails after this
_LOCAL_NAMES = frozenset({"localhost", "::1", "0.0.0.0", "::"})


def parse_host(value: str) -> str:
    """``value`` as Ollama's ``OLLAMA_HOST`` is written (``host``, ``host:port``, ``:port``,
    ``http(s)://host[:port][/path]``) -> ``scheme://host:port[/path]``; a bare host gets
    port 11434, a URL without a port 80/443 (as ollama-python does). Raises ConfigError
    for another scheme or a port outside 1-65535."""
    raw = value.strip()
    scheme, sep, rest = raw.partition("://")
    if not sep:
        scheme, rest = "http", raw
    scheme = scheme.lower()
    if scheme not in ("http", "https"):
        raise ConfigError(f"ollama_host {value!r}: Ollama speaks http:// or https://, not {scheme}://; "
                          f"set GITRAG_OLLAMA_HOST (or ollama_host) to e.g. http://127.0.0.1:{DEFAULT_PORT}")
    split = urlsplit(f"{scheme}://{rest}")
    try:
        port = split.port
    except ValueError:
        port = -1
    if port is not None and not 0 < port < 65536:
        raise ConfigError(f"ollama_host {value!r}: the port must be a number from 1 to 65535; "
                          f"Ollama listens on {DEFAULT_PORT} unless told otherwise")
    if port is None:
        port = DEFAULT_PORT if not sep else (443 if scheme == "https" else 80)
    name = split.hostname or "127.0.0.1"
    name = f"[{name}]" if ":" in name else name
    return f"{scheme}://{name}:{port}{split.path.rstrip('/')}"


def is_local(host: str) -> bool:
    """The host (parsed or not) is this machine: a loopback name or address, or 0.0.0.0/::."""
    name = urlsplit(host if "://" in host else f"http://{host}").hostname or "127.0.0.1"
    return name in _LOCAL_NAMES or name.startswith("127.")


def client(host: str, read_s: float) -> Any:
    """An ``ollama.Client`` for ``host`` (as :func:`parse_host` gives it): ``read_s`` seconds
    for an answer, at most :data:`CONNECT_S` to connect, no proxy for a local server.
    Raises ImportError without the ``ollama`` package."""
    import httpx
    import ollama

    timeout = httpx.Timeout(read_s, connect=min(CONNECT_S, read_s))
    return ollama.Client(host=host, timeout=timeout, trust_env=not is_local(host))


def model_names(host: str, timeout_s: float = 3.0) -> list[str]:
    """The names of the models the server at ``host`` (as :func:`parse_host` gives it) has
    pulled (``GET /api/tags``), reached as :func:`client` reaches it. Raises OSError when it
    cannot be reached or answers with an HTTP error, ValueError for a body that is not JSON."""
    import httpx

    timeout = httpx.Timeout(timeout_s, connect=min(CONNECT_S, timeout_s))
    try:
        with httpx.Client(timeout=timeout, trust_env=not is_local(host)) as http:
            resp = http.get(host.rstrip("/") + "/api/tags")
            resp.raise_for_status()
    except httpx.HTTPError as exc:
        raise OSError(str(exc) or type(exc).__name__) from exc
    return [m.get("name") or m.get("model", "") for m in resp.json().get("models", [])]
