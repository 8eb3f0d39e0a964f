"""The cached sparse-term code gives exactly the vectors of the straightforward version.

``gitrag.index.sparse`` caches per-identifier term expansion and term ids for speed; vectors are
cached by ``sparse.VERSION``, so any difference in terms, order or float weights would
leave stale vectors in every user's cache. The reference below is the uncached
implementation (sparse VERSION 2) kept verbatim; it is compared on real source: the
running Python's standard library and this repository's own files.
"""

from __future__ import annotations

import re
import sysconfig
import zlib
from collections import Counter
from pathlib import Path

import pytest

from gitrag.index import sparse

_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)*|\d+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def ref_terms(text: str) -> list[str]:
    out: list[str] = []
    for match in _IDENT.finditer(text):
        word = match.group(0)
        whole = word.lower().strip("_$")
        if len(whole) < 2 or whole in sparse.STOP:
            continue
        out.append(whole)
        parts, words = ref_split(word)
        if len(parts) > 1 or (parts and parts[0] != whole):
            out.extend(p for p in parts if p != whole)
        for part in words:
            root = ref_stem(part)
            if root != part:
                out.append(root)
    return out


def ref_stem(word: str) -> str:
    if len(word) < 4 or not word.isalpha():
        return word
    root = sparse._STEMMER.stemWord(word)
    return root if len(root) >= 3 else word


def ref_split(word: str) -> tuple[list[str], list[str]]:
    parts: list[str] = []
    words: list[str] = []
    for piece in re.split(r"[._$]+", word):
        if not piece:
            continue
        sub = [s.lower() for s in _CAMEL.findall(piece) or [piece]]
        if len(sub) > 1:
            parts.append(piece.lower())
        parts.extend(sub)
        words.extend(sub)
    keep = [p for p in dict.fromkeys(parts) if len(p) >= 2 and p not in sparse.STOP]
    return keep, [w for w in dict.fromkeys(words) if len(w) >= 4 and w not in sparse.STOP]


def ref_document_vector(text: str) -> tuple[list[int], list[float]]:
    counts = Counter(ref_terms(text))
    dl = sum(counts.values()) or 1
    norm = sparse.K1 * (1 - sparse.B + sparse.B * dl / sparse.AVGDL)
    weights: dict[int, float] = {}
    for term, tf in counts.items():
        tid = zlib.crc32(term.encode("utf-8", "surrogatepass"))
        weights[tid] = weights.get(tid, 0.0) + tf * (sparse.K1 + 1) / (tf + norm)
    idx = sorted(weights)
    return idx, [float(weights[i]) for i in idx]


def _texts() -> list[str]:
    """Chunk-sized pieces of real files: every 6th stdlib module plus this
    repository's Python sources, cut at 1,500 characters."""
    stdlib = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[::6]
    repo = sorted(Path(__file__).resolve().parents[1].glob("gitrag/**/*.py"))
    out = []
    for path in stdlib + repo:
        text = path.read_text(encoding="utf-8", errors="replace")
        out.extend(text[i : i + 1500] for i in range(0, len(text), 1500))
    # identifiers the splitter treats specially: dots, $, digits, camel runs, non-ASCII
    out.append("os.path.join HTTPServerV2 _unpack_args $scope __init__ x2 10 getURLForIDs naïve Straße")
    return out


TEXTS = _texts()


def test_corpus_is_real() -> None:
    assert len(TEXTS) > 500
    assert sum(len(ref_terms(t)) for t in TEXTS[:50]) > 5000


@pytest.mark.parametrize("repeat", [1, 2])  # the second pass runs on warm caches
def test_terms_and_vectors_match_reference(repeat: int) -> None:
    for text in TEXTS:
        assert sparse.terms(text) == ref_terms(text)
        vec = sparse.document_vector(text)
        idx, values = ref_document_vector(text)
        assert vec.indices == idx
        assert vec.values == values  # bit for bit: floats compared with ==


def test_query_and_path_vectors_match_reference() -> None:
    for text in TEXTS[::20]:
        q = sparse.query_vector(text)
        expected = sorted({zlib.crc32(t.encode("utf-8", "surrogatepass")) for t in ref_terms(text)})
        assert q.indices == expected and set(q.values) <= {1.0}
    vec = sparse.document_vector(TEXTS[0])
    withp = sparse.with_path(vec, "Lib/http/server.py")
    path_ids = {zlib.crc32(t.encode()) for t in ref_terms("Lib http server py")}
    assert path_ids <= set(withp.indices)


def test_compiled_stemmer_gives_the_pure_python_stems() -> None:
    """PyStemmer (compiled Snowball, picked by ``snowballstemmer`` when importable, ~18x
    faster) must stem every word exactly as the pure-Python Porter2 does: the stems are
    terms, and cached vectors do not say which stemmer made them."""
    import Stemmer  # a dependency: missing, this fails
    from snowballstemmer.english_stemmer import EnglishStemmer

    compiled, pure = Stemmer.Stemmer("english"), EnglishStemmer()
    stdlib = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    words = sorted({w for path in stdlib for ident in _IDENT.findall(path.read_text(encoding="utf-8", errors="replace"))
                    for w in ref_split(ident)[1]})
    assert len(words) > 10000
    assert [compiled.stemWord(w) for w in words] == [pure.stemWord(w) for w in words]
    assert type(sparse._STEMMER) is type(compiled)  # the index uses the compiled one


def test_terms_sharing_a_crc32_are_summed_as_the_reference_sums_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two terms with one id (a CRC-32 collision, rare but possible) get one weight, the sum
    of theirs in the order the terms first appear: the vectorised weights step must not
    lose or reorder either."""
    text = "gamma alpha beta beta alpha alpha delta.epsilon gamma"

    def colliding(term: str) -> int:
        return 7 if term in ("alpha", "beta") else zlib.crc32(term.encode("utf-8", "surrogatepass"))

    counts = Counter(ref_terms(text))
    norm = sparse.K1 * (1 - sparse.B + sparse.B * sum(counts.values()) / sparse.AVGDL)
    weights: dict[int, float] = {}
    for term, tf in counts.items():
        weights[colliding(term)] = weights.get(colliding(term), 0.0) + tf * (sparse.K1 + 1) / (tf + norm)
    monkeypatch.setattr(sparse, "term_id", colliding)
    vec = sparse.document_vector(text)
    assert vec.indices == sorted(weights) and 7 in vec.indices
    assert vec.values == [weights[i] for i in vec.indices]
