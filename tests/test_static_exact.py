"""The static embedder's fast paths give exactly what the plain numpy code gives.

``tokenize`` reads each token's start straight from the tokenizer's offsets and
``_sum_into`` gathers token vectors with ``take`` from the memory-mapped table and sums
them with ``_run_sums`` (numpy's pairwise order over whole rows, in place of
``np.add.reduceat``): all speed-ups only. Cached vectors and point ids depend on them, so they are compared bit for
bit with the straightforward versions on real source (the standard library) and on text
built to be awkward (accents, CJK, control characters, long words, CRLF).
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import numpy as np
import pytest

from gitrag.index.embedders.static import TOKENIZE_PIECE, StaticEmbedder, _pieces

AWKWARD = ("def naïve(x):\r\n    return 'Straße' + \"漢字かな\"  # x\u0301y\n\tclass Ω:\x0cpass\n"
           + "z" * 130 + " end\n")


@pytest.fixture(scope="module")
def emb() -> StaticEmbedder:
    return StaticEmbedder()


def _texts() -> list[str]:
    stdlib = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[::15]
    return [p.read_text(encoding="utf-8", errors="replace") for p in stdlib] + [AWKWARD * 50, "", "x"]


def test_tokenize_gives_the_tokenizers_ids_and_start_offsets(emb: StaticEmbedder) -> None:
    tok = emb._get_tokenizer()
    long_ones = 0
    for text in _texts():
        got = emb.tokenize(text)
        assert got is not None
        pieces, offsets = _pieces(text, TOKENIZE_PIECE)
        long_ones += len(pieces) > 1
        encs = tok.encode_batch(pieces, add_special_tokens=False)
        ids = np.concatenate([np.asarray(e.ids, dtype=np.int32) for e in encs])
        starts = np.concatenate([np.asarray(e.offsets, dtype=np.int64).reshape(-1, 2)[:, 0] + base
                                 for e, base in zip(encs, offsets)])
        assert got.ids.dtype == np.int32 and got.starts.dtype == np.int64
        assert np.array_equal(got.ids, ids) and np.array_equal(got.starts, starts)
    assert long_ones > 5  # texts cut into pieces, each piece's offsets shifted


def test_token_vector_sums_are_the_memmap_reduceat_bit_for_bit(emb: StaticEmbedder) -> None:
    vectors, keep = emb._get_vectors()
    assert isinstance(vectors, np.memmap)  # the fast path's case
    rng = np.random.default_rng(3)
    special = np.flatnonzero(~keep)
    rows = [rng.integers(0, vectors.shape[0], size=n) for n in (1, 7, 8, 129, 256, 300, 5000)]
    rows.append(np.concatenate([special, rng.integers(0, vectors.shape[0], size=40)]))  # special ids skipped
    rows.append(special[:2])  # nothing but special tokens: stays zero
    got = np.zeros((len(rows), emb.dim), dtype=np.float32)
    emb._sum_into(got, 0, rows)
    for i, row in enumerate(rows):
        kept = row[keep[row]]
        want = np.add.reduceat(vectors[kept], [0], axis=0, dtype=np.float32)[0] if kept.size else np.zeros(emb.dim)
        assert np.array_equal(got[i], want), i


def _reduceat_sums(emb: StaticEmbedder, rows: list[np.ndarray]) -> np.ndarray:
    """The pooling sum as it was before ``_run_sums``: every row's kept tokens gathered
    into one float16 array, then one ``np.add.reduceat`` summing in float32."""
    vectors, keep = emb._get_vectors()
    out = np.zeros((len(rows), emb.dim), dtype=np.float32)
    ids = [np.asarray(row, dtype=np.int64) for row in rows]
    lengths = np.array([len(row) for row in ids], dtype=np.int64)
    flat = np.concatenate(ids)
    owner = np.repeat(np.arange(len(ids)), lengths)
    mask = keep[flat]
    flat, owner = flat[mask], owner[mask]
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    out[owner[starts]] = np.add.reduceat(np.asarray(vectors)[flat], starts, axis=0, dtype=np.float32)
    return out


def test_pooling_sums_are_the_reduceat_formula_bit_for_bit_on_real_source(emb: StaticEmbedder) -> None:
    # real source cut into chunks of every length the pairwise order treats apart (under 8,
    # 8-128 in blocks of 8 with a tail, over 128 split in halves, several levels deep),
    # empty chunks and special-token-only chunks among them, summed in batches as the
    # embedder does
    _, keep = emb._get_vectors()
    special = np.flatnonzero(~keep)
    sizes = [0, 1, 2, 7, 8, 9, 15, 16, 17, 63, 100, 127, 128, 129, 130, 136, 137, 255, 256, 257, 300, 513, 1000,
             2049, 5000, 20000]
    rows: list[np.ndarray] = []
    for text in _texts():
        got = emb.tokenize(text)
        assert got is not None
        pos = 0
        for size in sizes:
            rows.append(got.ids[pos : pos + size])
            pos = (pos + size) % max(len(got.ids), 1)
        rows.append(got.ids)  # the whole file
    whole = [r for r in rows if len(r) > 2000]
    rows += [special[:3], np.concatenate([special, rows[40], special]), np.zeros(0, dtype=np.int32),
             np.concatenate(whole)]  # a chunk of a few hundred thousand tokens
    assert max(len(r) for r in rows) > 100_000 and sum(len(r) == 0 for r in rows) > 3
    for start in range(0, len(rows), 64):
        part = rows[start : start + 64]
        got_sums = np.zeros((len(part), emb.dim), dtype=np.float32)
        emb._sum_into(got_sums, 0, part)
        want = _reduceat_sums(emb, part)
        assert got_sums.tobytes() == want.tobytes(), start
        assert not want[[i for i, r in enumerate(part) if not keep[r].any()]].any()  # empty: zero rows


def test_embedded_texts_are_the_reduceat_formula_bit_for_bit(emb: StaticEmbedder) -> None:
    # the whole path, texts to unit rows: embed_documents against the tokenizer's ids summed
    # by the old formula and normalised
    texts = [t[i : i + n] for t in _texts() for i, n in ((0, 300), (500, 3000), (0, 60_000))] + ["", " \n"]
    got = emb.embed_documents(texts)
    encs = emb._get_tokenizer().encode_batch_fast(texts, add_special_tokens=False)
    want = _reduceat_sums(emb, [np.asarray(e.ids, dtype=np.int64) for e in encs])
    norms = np.linalg.norm(want, axis=1, keepdims=True)
    empty = norms[:, 0] == 0
    want[empty, 0] = 1.0
    norms[empty] = 1.0
    want /= norms
    assert empty.sum() >= 2
    assert got.tobytes() == want.tobytes()
