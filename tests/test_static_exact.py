"""The static embedder's fast paths give exactly what the plain numpy code gives.

``tokenize`` reads each token's start straight from the tokenizer's offsets and
``_sum_into`` gathers token vectors with ``take`` from the memory-mapped table: both are
speed-ups only. Cached vectors and point ids depend on them, so they are compared bit for
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
