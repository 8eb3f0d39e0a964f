"""Size policy: split oversized units at child boundaries, then merge small neighbours.

Units tile a byte range. :func:`layout` keeps a unit that fits (non-whitespace bytes within
the soft target and embedding-text tokens within the hard cap), otherwise asks ``expand``
for its children (split-then-merge, as in cAST) and falls back to line/byte windows.
All loops are iterative; nothing recurses on the syntax tree.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gitrag.index.chunking.model import TokenSpan
from gitrag.index.chunking.text import embedding_text, header

TARGET_NONWS = 1200  # soft target, non-whitespace bytes per chunk...
NONWS_PER_TOKEN = 3.5  # ...lowered to this many per token of the cap when that is smaller
TRIVIAL_NONWS = 24  # unlabelled pieces this small (a brace, a comment) join a neighbour
TINY_DEF_NONWS = 100  # definitions this small merge with adjacent small definitions
MAX_MERGED_LABELS = 8
_WS = np.ones(256, dtype=np.int32)
_WS[list(b" \t\r\n\f\v")] = 0
# bytes that are whitespace to both str.split/strip and a BERT pre-tokenizer (\f and \v
# are control characters there: deleted, not separators), so a cut beside one splits no word
_CLEAN = np.zeros(257, dtype=bool)
_CLEAN[list(b" \t\r\n")] = True
_CLEAN[256] = True  # stands for "start or end of the file"

Label = tuple[str, bool]  # (name, names a definition)


@dataclass
class Unit:
    """A byte range ``[start, end)`` on its way to becoming a chunk.

    ``mode`` decides merging: ``def`` (a definition), ``free`` (module code, fragments),
    ``head`` (a container's header: joins whatever follows), ``error`` (parser-rejected
    code), ``fixed`` (text windows, never merged). ``group`` numbers the split that made
    the unit (siblings share it); ``owner`` the scope it belongs to (the module, a class
    body, one definition's fragments), shared by the pieces of nested splits inside that
    scope, so a fragment can join its neighbour from a deeper or shallower split.
    """

    start: int
    end: int
    kind: str
    labels: tuple[Label, ...]
    fallback: str
    context: tuple[str, ...]
    group: int
    mode: str
    node: Any = None
    owner: int = 0
    info: Any = None
    prefix: str = ""
    member_kind: str = "function"
    named_defs: bool = True
    small_def: bool = False
    parts: tuple[Unit, ...] = ()
    text: str | None = field(default=None, compare=False)
    tokens: int = field(default=-1, compare=False)
    exact: bool = field(default=False, compare=False)  # tokens counted (else an estimate)
    _symbol: str | None = field(default=None, init=False, compare=False, repr=False)  # cached .symbol

    def copy(self, **changes: Any) -> Unit:
        """A shallow copy with ``changes``; cached text/tokens are dropped."""
        new = object.__new__(Unit)  # copy.copy, without its generic __reduce_ex__ round trip
        new.__dict__.update(self.__dict__)
        new.text, new.tokens, new.exact, new._symbol = None, -1, False, None
        for key, value in changes.items():
            setattr(new, key, value)
        return new

    @property
    def symbol(self) -> str:
        """Labels joined by ``", "`` (or the fallback); never empty. Computed once: units
        change only through :meth:`copy`, which drops it."""
        if self._symbol is None:
            self._symbol = ", ".join(name for name, _ in self.labels) or self.fallback or "<module>"
        return self._symbol


class Sizer:
    """Measures units of one file: non-whitespace bytes (O(1)) and embedding tokens."""

    def __init__(self, data: bytes, path: str, max_tokens: int,
                 count_tokens: Callable[[str], int] | None, target: int = TARGET_NONWS) -> None:
        self.data, self.path = data, path
        self.max_tokens = max(1, max_tokens)
        # a unit far above what the cap can hold is split without counting its tokens
        self.target = max(16, min(target, int(NONWS_PER_TOKEN * self.max_tokens)))
        self._count = count_tokens
        arr = _WS[np.frombuffer(data, dtype=np.uint8)]
        # read through a memoryview: indexing one gives a Python int ~10x cheaper than a
        # numpy scalar, and nonws / _token_range are called about 20 times per chunk
        self._cum = np.concatenate((np.zeros(1, np.int64), np.cumsum(arr, dtype=np.int64))).data
        self._headers: dict[tuple[str, tuple[str, ...]], tuple[str, int]] = {}
        # exact body counts from one tokenisation of the whole file (see body_tokens)
        self._tokenize = getattr(getattr(count_tokens, "__self__", None), "tokenize", None)
        # a header's count and its ids from one tokenisation (reused by the embedder's embed_spans)
        self._count_head = getattr(getattr(count_tokens, "__self__", None), "count_head", None)
        self._head_ids: dict[str, np.ndarray | None] = {}
        self._tokens: Any = None  # what the embedder's tokenize returned: ids, starts, model
        self._starts: list[int] | None = None
        self._chars: memoryview | None = None
        self._clean: memoryview | None = None

    def nonws(self, start: int, end: int) -> int:
        return int(self._cum[end]) - int(self._cum[start])

    def count(self, text: str) -> int:
        """Tokens of ``text``: the embedder's count, else ``ceil(len/3)`` (conservative)."""
        if self._count is None:
            return math.ceil(len(text) / 3)
        return int(self._count(text))

    def body_tokens(self, start: int, end: int) -> int | None:
        """Tokens (no [CLS]/[SEP]) of ``data[start:end]`` taken from one tokenisation of the
        whole file, or ``None`` when that is not known to be exact.

        Exact when the embedder offers ``tokenize`` (a BERT-style normaliser and
        pre-tokeniser: per-character normalisation, words split at whitespace), the file is
        valid UTF-8 and both cuts lie beside an ASCII space, tab, CR or LF (or at the file's
        ends): then no word crosses a cut, the range's tokens are exactly the file's tokens
        that start inside it, and the whitespace that ``normalise`` removes or the newline
        that joins header and body changes no word. So ``count(embedding_text(head, body))
        == count(head) + body_tokens`` (counted ``head`` includes [CLS] and [SEP])."""
        span = self._token_range(start, end)
        return None if span is None else span[1] - span[0]

    def _token_range(self, start: int, end: int) -> tuple[int, int] | None:
        """``[lo, hi)``: the indices of the file's tokens that make up ``data[start:end]``
        (see :meth:`body_tokens`), or None when not known to be exact."""
        if self._tokenize is None:
            return None
        if self._starts is None:
            try:
                text = self.data.decode("utf-8")
            except UnicodeDecodeError:
                self._tokenize = None
                return None
            arr = np.frombuffer(self.data, dtype=np.uint8)
            lead = ((arr & 0xC0) != 0x80).astype(np.int64)
            self._chars = np.concatenate((np.zeros(1, np.int64), np.cumsum(lead))).data
            codes = np.concatenate(([256], arr.astype(np.int64), [256]))
            cut = _CLEAN[codes]
            self._clean = (cut[:-1] | cut[1:]).data  # position p: byte p-1 or byte p is clean
            self._tokens = self._tokenize(text)
            if self._tokens is None:  # the embedder cannot vouch for this tokenizer
                self._tokenize = None
                return None
            self._starts = self._tokens.starts.tolist()
        assert self._chars is not None and self._clean is not None and self._starts is not None
        if not (self._clean[start] and self._clean[end]):
            return None
        lo, hi = int(self._chars[start]), int(self._chars[end])
        return bisect.bisect_left(self._starts, lo), bisect.bisect_left(self._starts, hi)

    def span(self, unit: Unit) -> TokenSpan | None:
        """The exact token ids of the unit's embedding text (see :class:`TokenSpan`), or
        None when they are not known (then the text is embedded)."""
        rng = self._token_range(unit.start, unit.end)
        if rng is None:
            return None
        head, _ = self.header(unit.symbol, unit.context)
        return TokenSpan(self._tokens.model, head, self._tokens.ids[rng[0] : rng[1]], self._head_ids.get(head))

    def text(self, unit: Unit) -> str:
        """The unit's embedding text (built once, cached on the unit)."""
        if unit.text is None:
            head, _ = self.header(unit.symbol, unit.context)
            body = self.data[unit.start : unit.end].decode("utf-8", "replace")
            unit.text = embedding_text(head, body)
        return unit.text

    def header(self, symbol: str, context: tuple[str, ...]) -> tuple[str, int]:
        """The header for ``symbol``/``context``, shortened until it takes <= 1/3 of the cap."""
        key = (symbol, context)
        cached = self._headers.get(key)
        if cached is None:
            ids = None
            for level in range(4):
                head = header(self.path, symbol, context, level)
                if self._count_head is None:
                    tokens = self.count(head)
                else:
                    tokens, ids = self._count_head(head)
                if tokens <= self.max_tokens // 3:
                    break
            cached = self._headers[key] = (head, tokens)
            if ids is not None:
                self._head_ids[head] = ids
        return cached

    def measure(self, unit: Unit, exact: bool = True) -> int:
        """Tokens of the unit's embedding text (counted once, cached on the unit); with
        ``exact=False`` a merge estimate already on the unit is returned as is."""
        if not exact and unit.tokens >= 0:
            return unit.tokens
        if not unit.exact:
            body_tokens = self.body_tokens(unit.start, unit.end)
            if body_tokens is None:
                unit.tokens = self.count(self.text(unit))
            else:  # the text itself is built only for the final chunks
                unit.tokens = self.header(unit.symbol, unit.context)[1] + body_tokens
            unit.exact = True
        return unit.tokens

    def fits(self, unit: Unit) -> bool:
        """Within the non-whitespace target and, counted exactly, within the token cap."""
        if self.nonws(unit.start, unit.end) > self.target:
            return False
        return self.measure(unit) <= self.max_tokens


Expand = Callable[[Unit], list[Unit]]
Windows = Callable[[Unit], list[Unit]]


def layout(units: list[Unit], sizer: Sizer, expand: Expand, windows: Windows) -> list[Unit]:
    """Split every unit until it fits, then merge neighbours; the result tiles the input."""
    done: list[Unit] = []
    stack = units[::-1]
    while stack:
        unit = stack.pop()
        if sizer.fits(unit):
            done.append(unit)
            continue
        parts = expand(unit) if unit.node is not None else []
        if len(parts) >= 2:
            stack.extend(reversed(parts))
        else:
            done.extend(windows(unit))
    return merge(done, sizer, windows)


def merge(units: list[Unit], sizer: Sizer, windows: Windows) -> list[Unit]:
    """Greedy left-to-right merge of adjacent units (see :func:`_mergeable`), then an
    exact count of every result: a merge whose estimate was wrong is redone with exact
    counts, a unit that does not fit after all goes to ``windows`` (which count exactly)."""
    work = _greedy(units, sizer, exact=False)[::-1]
    final: list[Unit] = []
    while work:
        unit = work.pop()
        if unit.parts and not unit.exact:
            unit.text, unit.tokens = None, -1
        if sizer.fits(unit):
            final.append(unit)
        elif unit.parts:
            work.extend(_greedy(list(unit.parts), sizer, exact=True)[::-1])
        else:
            final.extend(windows(unit))
    return final


def _greedy(units: list[Unit], sizer: Sizer, exact: bool) -> list[Unit]:
    out: list[Unit] = []
    for unit in units:
        if out and _mergeable(out[-1], unit, sizer):
            joined = _join(out[-1], unit, sizer, exact)
            if joined is not None:
                out[-1] = joined
                continue
        out.append(unit)
    return out


def _mergeable(a: Unit, b: Unit, sizer: Sizer) -> bool:
    if "fixed" in (a.mode, b.mode):
        return False
    if a.group != b.group and a.mode != "head" and not _same_scope(a, b):
        return False
    if sizer.nonws(a.start, b.end) > sizer.target:
        return False
    if _trivial(b, sizer) or (not a.parts and _trivial(a, sizer)):
        return True
    if a.mode == "head":
        return True
    if a.mode == "def" or b.mode == "def":
        if b.mode == "def" and _loose_remark(a, sizer):
            return True
        return (a.small_def and b.small_def and a.kind == b.kind
                and sizer.nonws(a.start, b.end) <= sizer.target // 2
                and len(a.labels) + len(b.labels) <= MAX_MERGED_LABELS)
    return a.mode == b.mode


def _same_scope(a: Unit, b: Unit) -> bool:
    """Pieces of nested splits inside one scope (``for a in attrs:`` and the first
    statements of its body; the last piece of a loop and the statement after it): as in
    cAST, such siblings-of-siblings merge greedily up to the budget instead of standing
    alone as one-line chunks. Definitions never cross a split this way."""
    return a.owner == b.owner and a.mode == b.mode and a.mode in ("free", "error")


def _common_context(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    """The longest shared prefix: the context that encloses both pieces."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _loose_remark(unit: Unit, sizer: Sizer) -> bool:
    """A small comment before a definition (a section comment like ``# -- parsing
    methods --`` set off by a blank line): it joins the definition below instead of
    standing alone as a chunk; the definition keeps its name. Code (a ``__main__``
    guard) does not, nor does a comment that can join the code below it."""
    nodes = [part.node for part in unit.parts or (unit,)]
    return (unit.mode == "free" and not unit.labels and sizer.nonws(unit.start, unit.end) <= TINY_DEF_NONWS
            and all(node is not None and "comment" in node.type for node in nodes))


def _trivial(unit: Unit, sizer: Sizer) -> bool:
    """A closing brace, ``end``, a short comment: tiny and declaring nothing."""
    return (unit.mode != "def" and not unit.labels
            and sizer.nonws(unit.start, unit.end) <= TRIVIAL_NONWS)


def _join(a: Unit, b: Unit, sizer: Sizer, exact: bool) -> Unit | None:
    """``a`` and ``b`` as one unit if it fits (token count estimated unless ``exact``)."""
    labels = combine_labels(a.labels, b.labels)
    is_def = "def" in (a.mode, b.mode)
    first = a if a.mode == "def" or not is_def else b
    mode = "def" if is_def else b.mode if a.mode == "head" else a.mode
    joined = a.copy(
        end=b.end, labels=labels, kind=first.kind, mode=mode,
        node=None, info=None, small_def=a.small_def and b.small_def,
        parts=(a.parts or (a,)) + (b.parts or (b,)),
        fallback=a.fallback if a.labels or not b.labels else b.fallback,
        context=a.context if a.group == b.group else _common_context(a.context, b.context),
    )
    if exact:
        return joined if sizer.fits(joined) else None
    head_b = sizer.header(b.symbol, b.context)[1]
    head = sizer.header(joined.symbol, joined.context)[1]
    estimate = (sizer.measure(a, False) + sizer.measure(b, False) - head_b
                - sizer.header(a.symbol, a.context)[1] + head)
    if estimate + 2 > sizer.max_tokens:
        return None
    joined.tokens = estimate
    return joined


def combine_labels(a: tuple[Label, ...], b: tuple[Label, ...]) -> tuple[Label, ...]:
    """Concatenate label lists without duplicates; a non-definition name under another
    name present (the field ``Foo.x`` beside ``Foo``) is dropped."""
    out: list[Label] = []
    names = {n for n, _ in a} | {n for n, _ in b}
    for name, is_def in (*a, *b):
        if any(n == name for n, _ in out):
            continue
        if not is_def and any(name.startswith(p + s) for p in names for s in (".", "::") if p != name):
            continue
        out.append((name, is_def))
    return tuple(out)
