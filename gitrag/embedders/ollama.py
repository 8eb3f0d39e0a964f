"""``ollama``: embeddings from an Ollama server (work in progress)."""

from __future__ import annotations

from gitrag.embedders.base import register
from gitrag.errors import EmbedderUnavailable


@register("ollama")
def _factory(settings: object) -> object:
    raise EmbedderUnavailable("the ollama embedder is not implemented yet; use embedder = \"local\"")
