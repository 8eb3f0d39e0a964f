"""Opens everything that belongs to one repository: git, settings, state, store, embedder.

The one place that wires the adapters together; commands receive a :class:`Workspace`
and never reach for globals. The embedder is created lazily (loading a model is slow).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from gitrag import config, identity
from gitrag.config import Settings
from gitrag.errors import NotIndexed
from gitrag.git.repo import GitRepo
from gitrag.index.embedders import Embedder, create
from gitrag.index.state import State
from gitrag.index.store import Store, open_store


def collection_name(repo_id: str, fingerprint: str) -> str:
    """The collection of one (repository, embedder), shared by all the repository's branches.

    Shape: ``g<repo id 16 hex>_<embedder 8 hex>``: unique on a shared server, and the same
    after the repository moves (the id lives in its git dir, see :mod:`gitrag.identity`)."""
    fp_key = hashlib.sha256(fingerprint.encode()).hexdigest()[:8]
    return f"{_repo_prefix(repo_id)}{fp_key}"


def _repo_prefix(repo_id: str) -> str:
    """``g<repo id>_``: how every collection name of the repository starts."""
    return f"g{repo_id}_"


def _legacy_prefix(common_dir: Path) -> str:
    """How the previous release's per-branch collection names of this repository started."""
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

    @property
    def loaded_embedder(self) -> Embedder | None:
        """The embedder if it was made already (None: nothing asked for it; not made here)."""
        return self._embedder

    @property
    def repo_id(self) -> str:
        """The repository's id (the data folder is named with it)."""
        return identity.repo_id_of(self.data_dir)

    def collection(self) -> str:
        """The collection of the configured embedder, shared by every branch."""
        return collection_name(self.repo_id, self.embedder.fingerprint)

    def close(self) -> None:
        self.store.close()
        self.state.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


NOT_INDEXED = "not indexed: run `gitrag install` (hooks keep it current) or `gitrag index`"


def open_workspace(
    path: str | Path = ".", settings: Settings | None = None, embedder: Embedder | None = None, rebuild: bool = False,
    create: bool = True,
) -> Workspace:
    """Open the repository containing ``path`` with its settings, state and store.

    ``create=False`` (a read-only command: ``ask``, ``related``): a repository with no data
    folder here raises NotIndexed (NOT_INDEXED) and nothing is written (no id file in the git
    dir, no folder), after the errors that come first (settings, a branch name gitrag refuses,
    no commit yet, a GITRAG_HOME that cannot be written: NotWritable, the line ``index``
    gives). Raises NotARepository outside a git repository, ConfigError for bad settings,
    StateError for an unreadable state database or one of another format (unless
    ``rebuild``: then it is moved aside and the repository's collections dropped)."""
    repo = GitRepo(path)
    settings = settings or config.load_settings(repo.workdir)
    if not create and config.existing_repo_data_dir(repo.common_dir) is None:
        repo.branch()
        repo.require_head()
        config.check_writable()  # a home `gitrag index` could not write says so (NotWritable), as index does
        raise NotIndexed(NOT_INDEXED)
    data_dir = config.repo_data_dir(repo.common_dir)
    config.private_data_dir(data_dir)
    identity.record(data_dir, repo.common_dir)
    state = State(data_dir, reset_incompatible=rebuild, cache_path=config.data_root() / "cache.db")
    store = open_store(settings, data_dir)
    if state.reset_from is not None or state.migrated_from is not None:
        # the old state's collections mean nothing to the new one (per-branch ones of the
        # previous release, in this folder or named after the old path on a server)
        prefixes = (_repo_prefix(identity.repo_id_of(data_dir)), _legacy_prefix(repo.common_dir))
        for name in store.list_collections():
            if name.startswith(prefixes):
                store.drop_collection(name)
    return Workspace(repo, settings, data_dir, state, store, embedder)
