"""The systemd user unit: render it, install and enable it, take it out.

The template is the package's ``systemd/gitrag.service`` (the repository's top-level
``systemd/``); :func:`render` puts the installing interpreter in ``ExecStart`` and, when
set, ``GITRAG_HOME``, ``GITRAG_CONFIG`` and ``XDG_CONFIG_HOME`` in the environment, so the
service and the CLI agree on every path and read the same user config.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from gitrag.errors import SystemdError as SystemdError  # defined there, named here too

UNIT = "gitrag.service"
MARK = "# gitrag-unit"  # last line of a unit gitrag wrote
_PLAIN = re.compile(r"[A-Za-z0-9_@%+=:,./$-]+")  # a word systemd reads as written (``%`` doubled already)


def _refuse_control(what: str, value: str) -> None:
    bad = next((c for c in value if ord(c) < 0x20 or ord(c) == 0x7F), None)
    if bad is not None:
        raise SystemdError(f"{what} {value!r} holds the control character {bad!r}, which a systemd unit cannot "
                           "carry safely: use another folder, or `gitrag install --no-systemd`")


def quote(value: str, *, command: bool = False) -> str:
    """``value`` as one word of a unit setting, by systemd.syntax(7) and systemd.exec(7):
    ``%`` (a specifier) as ``%%``; in double quotes with ``\\`` and ``\"`` escaped unless it
    holds only characters systemd reads as written; and, in a
    command line (``command``), ``$`` (a variable) as ``$$``. Raises SystemdError for a
    control character (a newline would start a setting of its own)."""
    _refuse_control("the value", value)
    text = value.replace("%", "%%")
    if command:
        text = text.replace("$", "$$")
    if _PLAIN.fullmatch(text):  # nothing systemd splits or unescapes: as it is
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def quote_executable(path: str) -> str:
    """The program of ``ExecStart=``: systemd refuses ``\\``, ``"``, ``'`` and control
    characters in it ("Executable name contains special characters"), so those are
    refused here in one line; spaces and ``%`` are quoted (see :func:`quote`; systemd expands
    no variable in the program's name, so ``$`` stays as it is)."""
    _refuse_control("the interpreter path", path)
    bad = next((c for c in path if c in "\\\"'"), None)
    if bad is not None:
        raise SystemdError(f"the interpreter path {path!r} holds {bad!r}, which systemd refuses in an "
                           "executable name: install gitrag under a path without it, or `gitrag install --no-systemd`")
    return quote(path)


def available() -> bool:
    """Whether a systemd user manager answers (``systemctl --user`` works here)."""
    if shutil.which("systemctl") is None:
        return False
    proc = subprocess.run(["systemctl", "--user", "show-environment"], capture_output=True, check=False)
    return proc.returncode == 0


def unit_path() -> Path:
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".config"
    return base / "systemd" / "user" / UNIT


def render(python: str = sys.executable, env: Mapping[str, str] | None = None) -> str:
    """The unit text for ``python``; ``env`` (default: os.environ) supplies GITRAG_HOME,
    GITRAG_CONFIG and XDG_CONFIG_HOME if set (the last two: which user config is read), each
    made absolute. Values are quoted for systemd (:func:`quote`); SystemdError for one a
    unit cannot express."""
    env = os.environ if env is None else env
    text = (resources.files("gitrag") / "systemd" / UNIT).read_text(encoding="utf-8")
    lines = []
    for line in text.splitlines():
        if line.startswith("ExecStart="):
            line = f"ExecStart={quote_executable(python)} -m gitrag daemon"
        lines.append(line)
        if line.startswith("Environment=PYTHONUNBUFFERED"):
            # made absolute as this shell reads them: the service runs from another folder
            lines += [f"Environment={quote(f'{var}={Path(env[var]).expanduser().absolute()}')}"
                      for var in ("GITRAG_HOME", "GITRAG_CONFIG", "XDG_CONFIG_HOME") if env.get(var)]
    return "\n".join(lines) + f"\n{MARK}\n"


def _systemctl(*args: str) -> None:
    proc = subprocess.run(["systemctl", "--user", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemdError(f"`systemctl --user {' '.join(args)}` failed: {proc.stderr.strip()}; "
                           f"run `gitrag install --no-systemd` to start the daemon without systemd")


def install(python: str = sys.executable) -> list[str]:
    """Write, enable and start the unit; returns what changed. Raises SystemdError."""
    path, text = unit_path(), render(python)
    if path.exists() and path.read_text() == text:
        _systemctl("enable", "--now", UNIT)
        return []
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    _systemctl("daemon-reload")
    _systemctl("enable", UNIT)
    _systemctl("restart", UNIT)  # a running service picks up the new unit
    return [f"wrote {path}", f"enabled and started {UNIT} (systemctl --user status {UNIT})"]


def uninstall() -> list[str]:
    """Stop, disable and remove the unit if gitrag wrote it; returns what changed."""
    path = unit_path()
    if not path.exists() or MARK not in path.read_text():
        return []
    if available():
        subprocess.run(["systemctl", "--user", "disable", "--now", UNIT], capture_output=True, check=False)
    path.unlink()
    if available():
        subprocess.run(["systemctl", "--user", "daemon-reload"], capture_output=True, check=False)
    return [f"stopped, disabled and removed {path}"]
