"""The embedder registry: names to factories, above the adapters (as pre-commit's
``all_languages``): the built-in embedders are listed here by module and imported on first
use, so an adapter never imports the registry back and heavy libraries load only for the
embedder a repository uses. :func:`register` adds another (the tests' extra models).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from gitrag import config
from gitrag.errors import ConfigError

if TYPE_CHECKING:
    from gitrag.config import Settings
    from gitrag.index.embedders.base import Embedder

Factory = Callable[["Settings"], "Embedder"]

# name -> module whose ``factory(settings)`` builds it; the names are config.EMBEDDERS (settings judge them)
BUILTIN = {
    "static": "gitrag.index.embedders.static",
    "local": "gitrag.index.embedders.local",
    "ollama": "gitrag.index.embedders.ollama",
    "hash": "gitrag.index.embedders.hashing",
}
_EXTRA: dict[str, Factory] = {}


def register(name: str) -> Callable[[Factory], Factory]:
    """Decorator: make ``factory`` the embedder called ``name`` (replacing a built-in of that name)."""
    def deco(factory: Factory) -> Factory:
        _EXTRA[name] = factory
        config.extra_embedders.add(name)
        return factory

    return deco


def available() -> list[str]:
    """The embedder names :func:`create` accepts, sorted."""
    return sorted(set(BUILTIN) | set(_EXTRA))


def create(settings: Settings) -> Embedder:
    """Build the embedder named by ``settings.embedder``; raises ConfigError for unknown names
    (and whatever the embedder's constructor raises, e.g. EmbedderUnavailable)."""
    name = settings.embedder
    factory = _EXTRA.get(name)
    if factory is None:
        module = BUILTIN.get(name)
        if module is None:
            raise ConfigError(f"unknown embedder {name!r}; choose one of: {', '.join(available())}")
        factory = importlib.import_module(module).factory
    return factory(settings)
