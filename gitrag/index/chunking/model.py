"""Data the chunker produces: chunks of one file and its symbol facts.

Offsets are bytes into the file's raw content (slice the bytes, then decode); lines are
1-based and inclusive. Concatenating ``data[c.start_byte:c.end_byte]`` over a file's
chunks in order reproduces the file exactly.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

import numpy as np


@dataclass(frozen=True, eq=False)
class TokenSpan:
    """A chunk's embedding text as token ids, when the chunker knows them exactly.

    The text is ``head``, a newline, then a body whose tokens are ``ids`` (int32, no
    special tokens), sliced from the embedder's one tokenisation of the whole file
    (``tokenize``; exact when the body's cuts lie beside whitespace, see
    ``Sizer.body_tokens``): so ``tokens(text) == tokens(head) + ids``. ``model`` is the
    fingerprint of the embedder that tokenised the file. Used by ``embed_spans``.
    ``head_ids`` (int32, no special tokens), when not None: the head's own tokens, kept
    from the chunker's count of the head (the embedder's ``count_head``), so
    ``embed_spans`` does not tokenise the head again.
    """

    model: str
    head: str
    ids: np.ndarray
    head_ids: np.ndarray | None = None

    def with_prefix(self, prefix: str) -> TokenSpan:
        """The span of ``f"{prefix}\n{text}"``: the prefix joins the head (a newline splits
        no word, so the ids stay exact; the head is tokenised again)."""
        return replace(self, head=f"{prefix}\n{self.head}" if self.head else prefix, head_ids=None)


@dataclass(frozen=True)
class Chunk:
    """One retrievable unit of a file.

    ``symbol`` is the qualified name (``Class.method``, ``Type::method``, ``handler``) or,
    for module-level code, a short description (``<module>``); ``kind`` is one of
    ``function``, ``method``, ``class``, ``module``, ``section`` (Markdown), ``window``
    (line windows, files without a grammar) or ``error`` (a region the parser rejected).
    ``text`` is the exact embedding text (context header + whitespace-normalised body);
    ``hash`` is the hex SHA-256 of ``text`` in UTF-8, the chunk's identity for embedding.
    ``embeddable`` is False for a content-free chunk (only whitespace, byte-order marks
    and, at the top of the file, a ``#!`` line): it still tiles the file, but nothing in
    it can answer a question, so it is never embedded, stored or returned. ``span``: the
    text's exact token ids when the counting embedder offers ``tokenize`` (else None);
    not part of the chunk's identity. ``prose``: the share (0-1, 2 decimals) of its
    non-whitespace bytes that are comments or docstrings (gitrag.index.chunking.prose; 0.0 for
    files without a grammar). ``roles``: per role of gitrag.index.chunking.roles (``decl``: option
    declarations, ``test``: test code in an implementation file) the share of its
    non-whitespace bytes playing it, only the non-zero ones, as sorted (role, share) pairs.
    """

    start_byte: int
    end_byte: int
    start_line: int
    end_line: int
    symbol: str
    kind: str
    language: str
    text: str
    context: str = ""
    embeddable: bool = True
    span: TokenSpan | None = field(default=None, compare=False, repr=False)
    prose: float = 0.0
    roles: tuple[tuple[str, float], ...] = ()

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class SymbolDef:
    """A definition: ``name`` qualified, lines 1-based inclusive; ``parent`` the container."""

    name: str
    kind: str
    start_line: int
    end_line: int
    parent: str = ""


@dataclass(frozen=True)
class SymbolRef:
    """A fact about a name at a line: ``kind`` is ``call``, ``import`` or ``inherit``.

    ``source`` is the qualified name of the definition the reference sits in ("" at
    module level); ``target`` is the referenced name as written (``os.path.join``).
    """

    kind: str
    source: str
    target: str
    line: int


@dataclass
class FileAnalysis:
    """Everything the chunker learns from one file."""

    language: str
    chunks: list[Chunk] = field(default_factory=list)
    definitions: list[SymbolDef] = field(default_factory=list)
    references: list[SymbolRef] = field(default_factory=list)
    # why the file went to line windows instead of symbol chunks ("" when it did not)
    fallback_reason: str = ""
    # bytes inside regions the parser rejected (outermost ERROR nodes); 0 for a clean parse
    error_bytes: int = 0
