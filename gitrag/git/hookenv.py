"""What the hooks need from ``gitrag install``'s environment, kept in the repository, and the
log of the events they drop. Standard library only (the hook path imports it).

A commit from a shell, IDE or cron job whose environment lacks the ``GITRAG_HOME`` that
``install`` ran with would look for the registry, spool and socket in another place and
drop its event. So ``install`` records the variables that decide those places in the common
git dir, ``<common git dir>/gitrag-env`` (JSON: ``{"version": 1, "env": {NAME: VALUE or
null}}``, null: unset then), and the notifier applies them before it looks anything up: a
repository's hooks report to the home it was installed in, whoever commits. ``uninstall``
removes the file; it moves with the git dir.

Every event the notifier does not hand over (not a repository, not registered, a failure)
is one JSON line in ``<state dir>/dropped.jsonl`` (``{"time", "hook", "cwd", "repo",
"reason"}``), which ``gitrag doctor`` reads.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

ENV_FILE = "gitrag-env"
NAMES = ("GITRAG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR")  # where registry, spool, socket are
DROP_FILE = "dropped.jsonl"
DROP_KEEP_BYTES = 256 * 1024  # the log is cut to its newer half past this size


def recorded_value(name: str, env: Any = None) -> str | None:
    """``name`` from ``env`` (default os.environ) as :func:`record` writes it (absolute; None: unset)."""
    value = (os.environ if env is None else env).get(name)
    return str(Path(value).expanduser().absolute()) if value else None


def record(common_dir: Path, env: dict[str, str] | None = None) -> Path:
    """Write the install's environment (:data:`NAMES`, absolute) into ``common_dir``; returns
    the file. Raises OSError when the git dir cannot be written."""
    values = {name: recorded_value(name, env) for name in NAMES}
    target = Path(common_dir) / ENV_FILE
    tmp = target.with_name(f".{ENV_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"version": 1, "env": values}, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, target)
    return target


def recorded(common_dir: Path) -> dict[str, str | None] | None:
    """The environment ``install`` recorded for the repository, None when there is none."""
    try:
        data = json.loads((Path(common_dir) / ENV_FILE).read_text())
    except (OSError, ValueError):
        return None
    env = data.get("env") if isinstance(data, dict) else None
    if not isinstance(env, dict):
        return None
    return {k: (v if isinstance(v, str) else None) for k, v in env.items() if k in NAMES}


def apply(common_dir: Path, environ: Any = None) -> bool:
    """Set (or unset) the recorded variables in ``environ`` (default os.environ); returns
    whether the repository had a record."""
    env = recorded(common_dir)
    if env is None:
        return False
    target = os.environ if environ is None else environ
    for name, value in env.items():
        if value is None:
            target.pop(name, None)
        else:
            target[name] = value
    return True


def forget(common_dir: Path) -> bool:
    """Remove the record (uninstall); returns whether there was one."""
    try:
        (Path(common_dir) / ENV_FILE).unlink()
    except FileNotFoundError:
        return False
    return True


def drop_log() -> Path:
    from gitrag import config

    return config.state_dir() / DROP_FILE


def log_drop(hook: str, reason: str, repo: str | None = None, cwd: str | None = None) -> None:
    """Append one dropped event to :func:`drop_log`; never raises (a hook must not fail)."""
    try:
        from gitrag import config

        path = drop_log()
        config.private_mkdir(path.parent)
        try:
            if path.stat().st_size > DROP_KEEP_BYTES:
                data = path.read_bytes()
                path.write_bytes(data[len(data) // 2:].split(b"\n", 1)[-1])
        except FileNotFoundError:
            pass
        if cwd is None:
            try:
                cwd = os.getcwd()
            except OSError:
                cwd = None
        line = json.dumps({"time": round(time.time(), 3), "hook": hook, "cwd": cwd, "repo": repo, "reason": reason},
                          ensure_ascii=True)
        with path.open("a") as fh:
            fh.write(line + "\n")
    except Exception:  # noqa: BLE001 - the hook path never fails
        pass


def drops(since: float = 0.0) -> list[dict[str, Any]]:
    """The dropped events logged since ``since`` (epoch seconds), oldest first."""
    try:
        lines = drop_log().read_text(errors="replace").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and float(entry.get("time", 0)) >= since:
            out.append(entry)
    return out


def no_git_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default os.environ) without the GIT_* variables git exports to hooks.

    Keeps the ones that describe the user's set-up rather than the hook's repository
    (GIT_EXEC_PATH, GIT_SSH*, GIT_CONFIG_GLOBAL/NOSYSTEM, ...), as pre-commit does."""
    keep = {"GIT_EXEC_PATH", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSL_CAINFO", "GIT_SSL_NO_VERIFY",
            "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_SYSTEM"}
    source = os.environ if env is None else env
    return {k: v for k, v in source.items() if not k.startswith("GIT_") or k in keep}
