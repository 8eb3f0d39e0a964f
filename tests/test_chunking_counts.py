"""Token counts the chunker derives from one tokenisation of a file are exact.

With the static embedder the :class:`Sizer` counts a unit's body from the file's token
offsets instead of tokenising every candidate text (see ``Sizer.body_tokens``). Both
must give the real count of the embedding text, hence the very same chunks: checked here
with the bundled tokenizer on real source and on text built to break the shortcut
(accents, combining marks, CJK, control characters that BERT deletes, CRLF, words longer
than WordPiece's 100 characters).
"""

from __future__ import annotations

import random
import sysconfig
from pathlib import Path

import pytest

from gitrag.index.chunking import analyze
from gitrag.index.chunking.split import Sizer
from gitrag.index.chunking.text import embedding_text
from gitrag.index.embedders.static import StaticEmbedder

NASTY = (
    "def naïve(x):\r\n    return 'Straße' + \"漢字かな\"  # x\u0301y ÅNGSTRÖM\n"
    "\tclass Ω:\x0cpass\n\n\n    aa\x0bbb  \u00a0 nbsp\u3000wide \x1c sep\n"
    + "z" * 130 + " end\n"
    "    résumé = {'ﬁ': 'ligature', 'é': 'e\u0301'}\r\n\ufeffbom = 1\n  \n"
)


@pytest.fixture(scope="module")
def emb() -> StaticEmbedder:
    return StaticEmbedder()


def _sources() -> list[tuple[str, bytes]]:
    stdlib = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[::12]
    out = [(p.name, p.read_bytes()) for p in stdlib]
    out += [("nasty.py", NASTY.encode()), ("nasty.md", ("# Títle\n\n" + NASTY * 3).encode()),
            ("nasty.go", ("package main\n\nfunc Ünïcode() string {\n\treturn \"漢\"\n}\n" + NASTY).encode())]
    return out


def _cuts(data: bytes, rng: random.Random) -> list[int]:
    """Line starts, indentation ends, line-content ends, and some random positions."""
    cuts = {0, len(data)}
    pos = 0
    for line in data.split(b"\n"):
        cuts.add(pos)
        cuts.add(pos + len(line) - len(line.lstrip(b" \t")))
        cuts.add(pos + len(line.rstrip(b" \t\r")))
        pos += len(line) + 1
    cuts = {c for c in cuts if 0 <= c <= len(data)}
    cuts |= {rng.randrange(len(data) + 1) for _ in range(50)} if data else set()
    return sorted(cuts)


def test_body_tokens_match_counting_the_text(emb: StaticEmbedder) -> None:
    rng = random.Random(12)
    derived = refused = 0
    for path, data in _sources():
        sizer = Sizer(data, path, emb.max_tokens, emb.count_tokens)
        cuts = _cuts(data, rng)
        for _ in range(60):
            start, end = sorted(rng.sample(cuts, 2))
            end = min(end, start + rng.choice([80, 400, 3000]))
            body_tokens = sizer.body_tokens(start, end)
            if body_tokens is None:
                refused += 1
                continue
            derived += 1
            body = data[start:end].decode("utf-8", "replace")
            for head in ("", "Foo.bar", "naïve\nclass Ω:"):
                text = embedding_text(head, body)
                assert emb.count_tokens(text) == emb.count_tokens(head) + body_tokens, (path, start, end)
    assert derived > 300 and refused > 30  # both paths really ran


def test_cuts_inside_a_word_or_beside_a_deleted_control_are_refused(emb: StaticEmbedder) -> None:
    data = b"alpha beta\x0cgamma delta\n"
    sizer = Sizer(data, "a.txt", emb.max_tokens, emb.count_tokens)
    assert sizer.body_tokens(0, len(data)) is not None
    assert sizer.body_tokens(0, 3) is None  # inside "alpha"
    assert sizer.body_tokens(11, len(data)) is None  # after \x0c, which BERT deletes: "betagamma"
    assert sizer.body_tokens(0, 6) == emb.count_tokens("alpha") - 2
    invalid = Sizer(b"caf\xe9 x\n", "b.txt", emb.max_tokens, emb.count_tokens)
    assert invalid.body_tokens(0, 8) is None  # not UTF-8: decoded with replacements, counted directly


def test_chunks_are_the_same_as_counting_every_text(emb: StaticEmbedder) -> None:
    def plain(text: str) -> int:  # no embedder behind it: the Sizer tokenises every text
        return emb.count_tokens(text)

    for max_tokens in (256, 64):
        for path, data in _sources():
            fast = analyze(path, data, max_tokens=max_tokens, count_tokens=emb.count_tokens)
            slow = analyze(path, data, max_tokens=max_tokens, count_tokens=plain)
            assert fast.chunks == slow.chunks, path
            assert all(emb.count_tokens(c.text) <= max_tokens for c in fast.chunks if c.embeddable) or max_tokens < 100


def test_chunks_embedded_from_their_token_spans_get_the_texts_vectors(emb: StaticEmbedder) -> None:
    """The indexer embeds a chunk from the token ids the chunker took from the file's one
    tokenisation (``Chunk.span``, ``embed_spans``): bit for bit the vector of its text."""
    from dataclasses import replace

    import numpy as np

    from gitrag.index.embedders.base import embed_partial

    total = with_span = 0
    for path, data in _sources():
        chunks = [c for c in analyze(path, data, max_tokens=emb.max_tokens, count_tokens=emb.count_tokens).chunks
                  if c.embeddable]
        texts, spans = [c.text for c in chunks], [c.span for c in chunks]
        total, with_span = total + len(chunks), with_span + sum(s is not None for s in spans)
        for c in chunks:
            if c.span is not None:  # the ids are the text's own tokens after the head's
                head = emb._get_tokenizer().encode(c.span.head, add_special_tokens=False).ids
                assert head + c.span.ids.tolist() == emb._get_tokenizer().encode(c.text, add_special_tokens=False).ids
                # the head's ids kept from the chunker's count of it: embed_spans tokenises no head again
                assert c.span.head_ids is not None and c.span.head_ids.tolist() == head
        vectors, failed = embed_partial(emb, texts, spans)
        assert failed == [] and np.array_equal(vectors, emb.embed_documents(texts)), path
        # a prefix (a context line before the chunk text) keeps the ids exact
        prefixed = [s.with_prefix("gitrag/…/x.py: naïve") if s is not None else None for s in spans]
        got, _ = embed_partial(emb, [f"gitrag/…/x.py: naïve\n{t}" for t in texts], prefixed)
        assert np.array_equal(got, emb.embed_documents([f"gitrag/…/x.py: naïve\n{t}" for t in texts])), path
    assert with_span > 0.8 * total and total > 300
    # spans of another model are never used: the texts are embedded
    foreign = [replace(s, ids=np.zeros(3, np.int32), model="other") if s is not None else None for s in spans]
    got, _ = embed_partial(emb, texts, foreign)
    assert np.array_equal(got, emb.embed_documents(texts))


def test_a_model_folder_with_another_tokenizer_gets_no_shortcut(tmp_path: Path, emb: StaticEmbedder) -> None:
    """Counting and embedding from one tokenisation of the file hold for BERT's tokenizer
    only: a model folder whose tokenizer splits words otherwise counts and embeds texts."""
    import json
    import shutil

    folder = tmp_path / "other-static"
    shutil.copytree(emb.path, folder)
    config = json.loads((folder / "tokenizer.json").read_text())
    config["pre_tokenizer"] = {"type": "Whitespace"}
    (folder / "tokenizer.json").write_text(json.dumps(config))
    other = StaticEmbedder(folder)
    assert other.tokenize("def f(x): pass") is None and emb.tokenize("def f(x): pass") is not None
    path, data = _sources()[0]
    chunks = analyze(path, data, max_tokens=other.max_tokens, count_tokens=other.count_tokens).chunks
    assert chunks and all(c.span is None for c in chunks)
    assert all(c.span is not None for c in analyze(path, data, max_tokens=emb.max_tokens,
                                                   count_tokens=emb.count_tokens).chunks if c.embeddable)


def test_a_tokenizer_that_does_not_wrap_in_cls_and_sep_keeps_no_head_ids(tmp_path: Path, emb: StaticEmbedder) -> None:
    """``count_head`` strips the [CLS] ... [SEP] it counts only when the tokenizer adds
    exactly those: without a post-processor the count is the bare tokens, the ids are not
    kept, and embed_spans tokenises the heads itself (the vectors stay the texts')."""
    import json
    import shutil

    import numpy as np

    from gitrag.index.embedders.base import embed_partial

    assert emb.count_head("class Ω: pass")[0] == emb.count_tokens("class Ω: pass")
    folder = tmp_path / "bare-static"
    shutil.copytree(emb.path, folder)
    config = json.loads((folder / "tokenizer.json").read_text())
    config["post_processor"] = None
    (folder / "tokenizer.json").write_text(json.dumps(config))
    other = StaticEmbedder(folder)
    assert other.count_head("class Ω: pass") == (other.count_tokens("class Ω: pass"), None)
    assert other.count_tokens("class Ω: pass") == emb.count_tokens("class Ω: pass") - 2
    path, data = _sources()[0]
    chunks = [c for c in analyze(path, data, max_tokens=other.max_tokens, count_tokens=other.count_tokens).chunks
              if c.embeddable]
    spans = [c.span for c in chunks]
    assert any(s is not None for s in spans) and all(s.head_ids is None for s in spans if s is not None)
    texts = [c.text for c in chunks]
    got, _ = embed_partial(other, texts, spans)
    assert np.array_equal(got, other.embed_documents(texts))
