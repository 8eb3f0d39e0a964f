"""``hash``: a small deterministic embedder for tests and quick trials.

Feature hashing of lower-cased word tokens and character trigrams into ``dim`` buckets,
signed, then L2-normalised. No model, no network, microseconds per text; similar texts get
similar vectors, which is enough for tests of the pipeline (not for real retrieval).
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from gitrag.index.embedders.base import l2_normalise, make_fingerprint

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")


class HashEmbedder:
    name = "hash"

    def __init__(self, dim: int = 64, max_tokens: int = 512) -> None:
        self.dim = dim
        self.max_tokens = max_tokens

    @property
    def fingerprint(self) -> str:
        return make_fingerprint(kind="hash", dim=self.dim, version=1)

    def count_tokens(self, text: str) -> int:
        # a deliberately conservative stand-in for a subword tokenizer
        return len(_WORD.findall(text)) + len(re.findall(r"[^\sA-Za-z0-9_]", text)) + 2

    def _one(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        lowered = text.lower()
        feats = _WORD.findall(lowered)
        feats += [lowered[i : i + 3] for i in range(0, max(len(lowered) - 2, 0), 2)]
        for feat in feats:
            h = hashlib.blake2b(feat.encode("utf-8", "surrogatepass"), digest_size=8).digest()
            idx = int.from_bytes(h[:4], "little") % self.dim
            vec[idx] += 1.0 if h[4] & 1 else -1.0
        if not vec.any():
            vec[0] = 1.0
        return vec

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return l2_normalise(np.stack([self._one(t) for t in texts]))

    def embed_query(self, text: str) -> np.ndarray:
        return l2_normalise(self._one(text)[None, :])[0]


def factory(settings: object) -> HashEmbedder:
    return HashEmbedder()
