"""Opens everything that belongs to one repository: git, settings, state, store, embedder.

The one place that wires the adapters together; commands receive a :class:`Workspace`
and never reach for globals. The embedder is created lazily (loading a model is slow).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from gitrag import config
from gitrag.config import Settings
from gitrag.embedders import Embedder, create
from gitrag.gitrepo import GitRepo
from gitrag.state import State
from gitrag.store import Store, open_store


def collection_name(common_dir: Path, branch: str, fingerprint: str) -> str:
    """A collection name that is unique per (repository, branch, embedder) and safe anywhere.

    Shape: ``g<repo 8 hex>_<embedder 8 hex>_<branch slug ≤ 24>_<branch 10 hex>``; the slug is
    for people, the hash for uniqueness (any branch name works: slashes, unicode, case)."""
    fp_key = hashlib.sha256(fingerprint.encode()).hexdigest()[:8]
    slug = re.sub(r"[^a-z0-9]+", "-", branch.lower()).strip("-")[:24] or "b"
    branch_key = hashlib.sha256(branch.encode("utf-8", "surrogateescape")).hexdigest()[:10]
    return f"{_repo_prefix(common_dir)}{fp_key}_{slug}_{branch_key}"


def _repo_prefix(common_dir: Path) -> str:
    """``g<repo 8 hex>_``: how every collection name of the repository starts."""
    repo_key = hashlib.sha256(str(Path(common_dir).resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f"g{repo_key}_"


@dataclass
class Workspace:
    repo: GitRepo
    settings: Settings
    data_dir: Path
    state: State
    store: Store
    _embedder: Embedder | None = field(default=None, repr=False)

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = create(self.settings)
        return self._embedder

    def collection(self, branch: str) -> str:
        return collection_name(self.repo.common_dir, branch, self.embedder.fingerprint)

    def close(self) -> None:
        self.store.close()
        self.state.close()


def open_workspace(
    path: str | Path = ".", settings: Settings | None = None, embedder: Embedder | None = None, rebuild: bool = False
) -> Workspace:
    """Open the repository containing ``path`` with its settings, state and store.

    Raises NotARepository outside a git repository, ConfigError for bad settings,
    StateError for an unreadable state database or one of another format (unless
    ``rebuild``: then it is moved aside and the repository's collections dropped)."""
    repo = GitRepo(path)
    settings = settings or config.load_settings(repo.workdir)
    data_dir = config.repo_data_dir(repo.common_dir)
    config.private_data_dir(data_dir)
    (data_dir / "repo").write_text(str(repo.common_dir))
    state = State(data_dir, reset_incompatible=rebuild)
    store = open_store(settings, data_dir)
    if state.reset_from is not None:  # the old state's collections mean nothing to the new one
        for name in store.list_collections():
            if name.startswith(_repo_prefix(repo.common_dir)):
                store.drop_collection(name)
    return Workspace(repo, settings, data_dir, state, store, embedder)
