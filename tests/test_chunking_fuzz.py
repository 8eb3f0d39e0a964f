"""Hypothesis fuzzing of ``analyze``: random, truncated and mangled sources never raise,
always tile the file byte for byte and always respect the token cap."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitrag.index.chunking import analyze
from gitrag.index.embedders.hashing import HashEmbedder

COUNT = HashEmbedder().count_tokens

SAMPLES = {
    "a.py": b'import os\n\n@dec\ndef f(x: int) -> int:\n    """Doc."""\n    return g(x)\n\n'
            b"class C(B):\n    X = 1\n    def m(self):\n        return [i for i in range(3)]\n",
    "a.ts": b'import { a } from "./a";\nexport const h = async (x: number) => { await a(x); };\n'
            b"export default class S<T> extends B implements I { m(): void { this.x(); } }\n",
    "a.tsx": b"export function App() { return <div onClick={() => go()}>{items}</div>; }\n",
    "a.go": b'package p\n\nimport "fmt"\n\ntype S struct{ B }\n\n'
            b'func (s *S) Run() error { fmt.Println("x"); return nil }\n',
    "a.rs": b"use std::fmt;\n/// Doc\n#[derive(Debug)]\nstruct P { x: i32 }\n"
            b"impl fmt::Display for P { fn fmt(&self) -> u8 { write!(f, \"{}\", 1) } }\n",
    "A.java": b"package a;\nimport b.C;\n/** D */\n@Ann\npublic class A extends B {\n"
              b"  @Override public void run() { helper(); }\n}\n",
    "a.c": b"#include <stdio.h>\n#define N 3\nint add(int a, int b) { return a + b; }\n",
    "a.h": b"namespace n { template <class T> class K : public B { int f() const; }; }\n",
    "a.rb": b"require 'x'\nclass A < B\n  def run(a)\n    h(a)\n  end\nend\n",
    "a.php": b"<?php\nuse A\\B;\nclass C extends D { function f() { g(); } }\n",
    "a.md": b"# T\n\ntext\n\nSub\n---\n\n```\n# code\n```\n",
    "a.txt": b"plain words\n" * 5,
}
ALPHABET = st.sampled_from(list(b"{}()[]<>;:,.=+-*/'\"`#@!?\\\n\t abcdefXYZ_019") + [0xC3, 0xA9, 0xE2, 0x80, 0xFF])


def check(path: str, data: bytes, max_tokens: int) -> None:
    analysis = analyze(path, data, max_tokens=max_tokens, count_tokens=COUNT)
    pos = 0
    for chunk in analysis.chunks:
        assert chunk.start_byte == pos < chunk.end_byte
        assert chunk.symbol
        assert COUNT(chunk.text) <= max_tokens
        pos = chunk.end_byte
    assert pos == len(data)


FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ
@given(path=st.sampled_from(sorted(SAMPLES)), data=st.binary(max_size=600),
       max_tokens=st.integers(24, 300))
def test_random_bytes(path: str, data: bytes, max_tokens: int) -> None:
    check(path, data, max_tokens)


@FUZZ
@given(path=st.sampled_from(sorted(SAMPLES)), data=st.lists(ALPHABET, max_size=800).map(bytes),
       max_tokens=st.integers(24, 300))
def test_code_like_noise(path: str, data: bytes, max_tokens: int) -> None:
    check(path, data, max_tokens)


@FUZZ
@given(name=st.sampled_from(sorted(SAMPLES)), cut=st.tuples(st.integers(0, 400), st.integers(0, 400)),
       repeat=st.integers(1, 12), max_tokens=st.integers(24, 300))
def test_truncated_sources(name: str, cut: tuple[int, int], repeat: int, max_tokens: int) -> None:
    data = SAMPLES[name] * repeat
    start, length = sorted(cut)
    check(name, data[start : start + length + 40 * repeat], max_tokens)


@FUZZ
@given(name=st.sampled_from(sorted(SAMPLES)), edits=st.lists(
    st.tuples(st.integers(0, 2000), ALPHABET), max_size=12), max_tokens=st.integers(24, 300))
def test_mangled_sources(name: str, edits: list[tuple[int, int]], max_tokens: int) -> None:
    data = bytearray(SAMPLES[name] * 3)
    for pos, byte in edits:
        data[pos % len(data)] = byte
    check(name, bytes(data), max_tokens)


@FUZZ
@given(name=st.sampled_from(sorted(SAMPLES)), depth=st.integers(1, 3000),
       opener=st.sampled_from(["(", "[", "{", "(\n", "{\n", "[\n"]))
def test_deep_nesting(name: str, depth: int, opener: str) -> None:
    closer = {"(": ")", "[": "]", "{": "}"}[opener[0]] + opener[1:]
    data = SAMPLES[name] + (opener * depth + closer * depth).encode()
    check(name, data, 256)
