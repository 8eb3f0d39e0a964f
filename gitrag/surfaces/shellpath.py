"""``--path`` as a shell gives it: ``./doc``, ``doc/``, an absolute path inside the repository,
or a folder relative to the current subfolder (what tab completion types), turned into the
repository-relative prefix the index filters on (``doc/``).

Standard library only, and the work tree is found as routing does (a few ``stat`` calls), so
an ``ask`` that goes to the daemon imports nothing more for it.
"""

from __future__ import annotations

import os
from pathlib import Path

from gitrag.daemon import routing


def _inside(here: Path, root: Path) -> str | None:
    """``here`` relative to ``root`` (``/``-separated, ``""`` for the root itself), or None
    when it lies outside. Folders get a trailing ``/``, so ``doc`` never also means ``docs/``."""
    here = Path(os.path.normpath(here))
    try:
        real = here.parent.resolve() / here.name if here.name else here.resolve()
        rel = real.relative_to(root)
    except (OSError, ValueError):
        return None
    text = rel.as_posix()
    if text == ".":
        return ""
    return text + "/" if here.is_dir() else text


def repository_prefix(value: str, repo: str, cwd: Path | None = None) -> str:
    """The repository-relative path prefix ``value`` means, for ``ask --path`` (and ``related
    --path``). ``cwd``: the folder the shell ran in (default: the current one).

    - absolute: relative to the work tree when inside it;
    - ``./x``, ``../x``: relative to ``cwd``, as the shell means it;
    - plain ``x``: the repository-relative ``x`` when it exists, else ``cwd``'s ``x`` when that
      exists (a user in ``doc/`` typing ``api``), else ``x`` as typed (a prefix of names,
      ``src/ne``, is still a prefix);
    - an existing folder ends with ``/``; the work tree's root is ``""`` (everything).

    Anything that resolves outside the repository is left as typed (it then matches nothing,
    and ``ask`` says which filter left everything out). Raises NotARepository as routing does."""
    if not value:
        return value
    root = routing.workdir(repo)
    if root is None:
        return value
    root = root.resolve()
    here_dir = Path.cwd() if cwd is None else cwd
    explicit = value in (".", "..") or value.startswith(("./", "../"))
    if os.path.isabs(value):
        tries = [Path(value)]
    elif explicit:
        tries = [here_dir / value]
    else:
        tries = [root / value, here_dir / value]
    for here in tries:
        if os.path.lexists(here):
            rel = _inside(here, root)
            if rel is not None:
                return rel
    if os.path.isabs(value) or explicit:  # a prefix of names under a folder typed as the shell gives it
        rel = _inside(tries[0].parent, root)
        if rel is not None and not tries[0].name.startswith("."):
            return f"{rel}{tries[0].name}" if rel == "" or rel.endswith("/") else f"{rel}/{tries[0].name}"
    return value
