"""Which data folder belongs to a repository: keyed by an id that survives a move.

A repository's id is 16 random hex digits in ``<common git dir>/gitrag-id`` (git never
copies that file: a clone gets its own id). Its data folder is ``<data root>/<slug>-<id>``
and records the git dir it serves in a ``repo`` file, so:

- a moved or renamed repository keeps its id, finds its folder and answers at once;
- a copy of a git dir (``cp -a``) carries the id along: the folder's ``repo`` names the
  original, which still exists with the same id, so the copy forks (a new id and folder;
  the shared vector cache means it embeds nothing already embedded);
- a git dir that cannot be written (another user's repository) falls back to the hash of
  its path, which is also how the previous release named folders (those are adopted).

Standard library only: the hook path reaches this through :func:`gitrag.config.repo_data_dir`.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import time
from pathlib import Path

ID_FILE = "gitrag-id"
RECORD_FILE = "repo"  # in the data folder: the common git dir it belongs to
MISSING_FILE = "missing-since"  # in the data folder: when gc first found that git dir missing
_ID = re.compile(r"^[0-9a-f]{16}$")


def path_key(common_dir: Path) -> str:
    """The previous release's folder key: 16 hex of the SHA-256 of the resolved git dir."""
    return hashlib.sha256(str(Path(common_dir).resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:16]


def read_id(common_dir: Path) -> str | None:
    """The id stored in the git dir, or None (missing or not an id)."""
    try:
        text = (Path(common_dir) / ID_FILE).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if _ID.match(text) else None


def _write_id(common_dir: Path, repo_id: str, replace: bool) -> str | None:
    """Store ``repo_id`` (atomically; unless ``replace``, an id written meanwhile by another
    process wins). Returns the id now stored, None if the git dir is not writable."""
    target = Path(common_dir) / ID_FILE
    tmp = target.with_name(f".{ID_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        tmp.write_text(repo_id + "\n")
        if replace:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)
            except FileExistsError:
                pass
            tmp.unlink(missing_ok=True)
    except OSError:
        tmp.unlink(missing_ok=True)
        return None
    return read_id(common_dir)


def _slug(common_dir: Path) -> str:
    resolved = Path(common_dir).resolve()
    parent = resolved.parent.name if resolved.name == ".git" else resolved.name
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", parent)[:40] or "repo"


def find_folder(root: Path, repo_id: str) -> Path | None:
    """The existing data folder of ``repo_id`` below ``root`` (any slug), or None."""
    if not root.is_dir():
        return None
    found = sorted(p for p in root.glob(f"*-{repo_id}") if p.is_dir())
    return found[0] if found else None


def recorded(folder: Path) -> Path | None:
    """The git dir a data folder says it belongs to."""
    try:
        text = (folder / RECORD_FILE).read_text().strip()
    except (OSError, UnicodeDecodeError):  # gone, or damaged: `record` writes it again
        return None
    return Path(text) if text and "\x00" not in text else None


def data_dir(root: Path, common_dir: Path) -> Path:
    """The data folder of the repository whose common git dir is ``common_dir`` (see the
    module doc); not created here, but a previous release's folder is renamed into place
    and a copied git dir gets its own id."""
    common = Path(common_dir).resolve()
    repo_id = read_id(common)
    if repo_id is not None:
        folder = find_folder(root, repo_id)
        owner = recorded(folder) if folder is not None else None
        if owner is not None and owner != common and owner.exists() and read_id(owner) == repo_id:
            fresh = _write_id(common, secrets.token_hex(8), replace=True)  # a copy: fork
            repo_id = fresh or path_key(common)
            folder = find_folder(root, repo_id)
        return folder or root / f"{_slug(common)}-{repo_id}"
    legacy = root / f"{_slug(common)}-{path_key(common)}"
    repo_id = _write_id(common, secrets.token_hex(8), replace=False)
    if repo_id is None:  # read-only git dir: the path is the key
        return legacy
    folder = find_folder(root, repo_id) or root / f"{_slug(common)}-{repo_id}"
    if legacy.is_dir() and not folder.exists():
        try:
            legacy.rename(folder)  # the previous release's folder: migrated on open
        except OSError:
            return legacy
    return folder


def existing_data_dir(root: Path, common_dir: Path) -> Path | None:
    """The data folder :func:`data_dir` would give when one already exists (by the stored id,
    else the previous release's path-keyed folder), else None; writes nothing (no id file, no
    rename): for read-only commands in a repository gitrag never indexed."""
    common = Path(common_dir).resolve()
    repo_id = read_id(common)
    if repo_id is not None:
        folder = find_folder(root, repo_id)
        if folder is not None:
            return folder
    legacy = root / f"{_slug(common)}-{path_key(common)}"
    return legacy if legacy.is_dir() else None


def record(folder: Path, common_dir: Path) -> None:
    """Note in ``folder`` which git dir it serves now (after a move: the new place)."""
    target = folder / RECORD_FILE
    text = str(Path(common_dir).resolve())
    try:
        if target.read_text() == text:
            return
    except (OSError, UnicodeDecodeError):  # missing, or damaged bytes: written again
        pass
    target.write_text(text)
    (folder / MISSING_FILE).unlink(missing_ok=True)  # found again (moved): the grace ends


def _missing_since(folder: Path, now: float) -> float:
    """When the folder's git dir was first found missing (Unix seconds); noted as ``now``
    the first time (a damaged note is written again)."""
    note = folder / MISSING_FILE
    try:
        return float(note.read_text().strip())
    except (OSError, ValueError):
        try:
            note.write_text(f"{now:.0f}\n")
        except OSError:  # a read-only data root: nothing is dropped before it can be noted
            pass
        return now


def repo_id_of(folder: Path) -> str:
    """The id a data folder is named with (its last 16 hex digits)."""
    return folder.name.rsplit("-", 1)[-1]


def gone_folders(root: Path, grace_s: float = 0.0, now: float | None = None) -> list[Path]:
    """Data folders whose repository no longer exists: the git dir they record has been
    missing for ``grace_s`` seconds or more, or holds another id (moved away and forked, or
    replaced). A folder whose git dir is missing is noted (MISSING_FILE) the first time and
    kept through the grace: a repository moved or renamed while no command ran finds its
    index again by its id at the next command. Folders without a record are left alone."""
    out: list[Path] = []
    if not root.is_dir():
        return out
    now = time.time() if now is None else now
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        owner = recorded(folder)
        if owner is None:
            continue
        own_id = repo_id_of(folder)
        if not owner.exists():
            if now - _missing_since(folder, now) >= grace_s:
                out.append(folder)
            continue
        (folder / MISSING_FILE).unlink(missing_ok=True)
        current = read_id(owner)
        if current is not None and current != own_id and own_id != path_key(owner):
            out.append(folder)
        elif current is not None and own_id == path_key(owner) and current != own_id and find_folder(root, current):
            out.append(folder)  # a previous release's folder, superseded by the id's folder
    return out
