"""The size policy: what merges, what splits, where cuts fall, how lines are counted."""

from __future__ import annotations

import textwrap

from gitrag.index.chunking import analyze
from gitrag.index.chunking.model import FileAnalysis
from gitrag.index.embedders.hashing import HashEmbedder

COUNT = HashEmbedder().count_tokens


def run(path: str, source: str, max_tokens: int = 256) -> tuple[bytes, FileAnalysis]:
    data = textwrap.dedent(source).lstrip("\n").encode()
    analysis = analyze(path, data, max_tokens=max_tokens, count_tokens=COUNT)
    assert b"".join(data[c.start_byte : c.end_byte] for c in analysis.chunks) == data
    assert all(COUNT(c.text) <= max_tokens for c in analysis.chunks)
    return data, analysis


BIG_BODY = "\n".join(f"    total += weight_{i} * measure(item_{i}, scale={i})" for i in range(12))


def test_module_constant_between_definitions_is_its_own_module_chunk() -> None:
    _, analysis = run("m.py", f"""
def first(items):
{BIG_BODY}
    return total

CHUNK_OVERLAP = 10

def second(items):
{BIG_BODY}
    return total
""")
    assert [(c.symbol, c.kind) for c in analysis.chunks] == [
        ("first", "function"), ("CHUNK_OVERLAP", "module"), ("second", "function")]


def test_tiny_methods_merge_and_braces_never_stand_alone() -> None:
    data, analysis = run("Point.java", """
        class Point {
            private int x;
            private int y;
            int getX() { return x; }
            int getY() { return y; }
            void scale(int factor) {
                this.x = this.x * factor + offset(factor, this.x, this.y, this.origin);
                this.y = this.y * factor + offset(factor, this.y, this.x, this.origin);
            }
        }
    """, max_tokens=72)
    symbols = [c.symbol for c in analysis.chunks]
    assert "Point.getX, Point.getY" in symbols
    assert len(analysis.chunks) > 2
    for chunk in analysis.chunks:
        assert data[chunk.start_byte : chunk.end_byte].strip() not in (b"}", b"};", b"")


def test_nested_functions_stay_in_their_parent() -> None:
    _, analysis = run("n.py", f"""
def outer(items):
    def inner(item):
        return item * 2
{BIG_BODY}
    return [inner(i) for i in items]
""", max_tokens=64)
    assert {c.symbol for c in analysis.chunks} == {"outer"}
    assert any("def inner" in c.text for c in analysis.chunks)


def test_byte_windows_cut_on_character_boundaries() -> None:
    data = ("x = '" + "é✓" * 6000 + "'\n").encode()
    analysis = analyze("wide.py", data, max_tokens=64, count_tokens=COUNT)
    assert analysis.fallback_reason
    for chunk in analysis.chunks:
        data[chunk.start_byte : chunk.end_byte].decode("utf-8")  # never splits a character
        assert COUNT(chunk.text) <= 64


def test_line_numbers_are_one_based_and_end_on_the_last_byte() -> None:
    data, analysis = run("l.py", f"""
import os


def first(items):
{BIG_BODY}
    return total
""", max_tokens=80)
    for chunk in analysis.chunks:
        assert chunk.start_line == data.count(b"\n", 0, chunk.start_byte) + 1
        assert chunk.end_line == data.count(b"\n", 0, chunk.end_byte - 1) + 1
    first = next(c for c in analysis.chunks if "first" in c.symbol)
    assert data[first.start_byte :].startswith(b"def first") or first.start_line <= 4


def test_same_bytes_give_the_same_texts() -> None:
    source = "class A:\n" + "".join(f"    def m{i}(self):\n        return {i}\n" for i in range(40))
    one = analyze("a.py", source.encode(), max_tokens=64, count_tokens=COUNT)
    two = analyze("a.py", source.encode(), max_tokens=64, count_tokens=COUNT)
    assert [(c.start_byte, c.text) for c in one.chunks] == [(c.start_byte, c.text) for c in two.chunks]


def test_crlf_files_chunk_and_normalise() -> None:
    data = b"import os\r\n\r\n\r\n\r\ndef f():\r\n    return 1   \r\n"
    analysis = analyze("w.py", data, count_tokens=COUNT)
    assert b"".join(data[c.start_byte : c.end_byte] for c in analysis.chunks) == data
    assert all("\r" not in c.text and "\n\n\n" not in c.text for c in analysis.chunks)


LOOP_BODY = "\n".join(f"        total += weight_{i} * measure(item, scale={i})" for i in range(40))


def test_loop_header_and_tail_join_the_pieces_of_the_split_body() -> None:
    # the loop is too big for one chunk, so it is split into its header line and its body's
    # statements; the one-line pieces (``total = 0``, ``for item in items:``, ``return``)
    # must join their neighbours rather than stand alone (attrs' ``for a in attrs:``)
    data, analysis = run("loop.py", f"""
def score(items):
    total = 0
    for item in items:
{LOOP_BODY}
        total -= 1
    return total
""")
    assert len(analysis.chunks) >= 2
    assert {c.symbol for c in analysis.chunks} == {"score"}
    for chunk in analysis.chunks:
        assert chunk.end_line - chunk.start_line >= 4, chunk
    first = data[analysis.chunks[0].start_byte : analysis.chunks[0].end_byte]
    assert b"for item in items:" in first and b"weight_0" in first
    last = analysis.chunks[-1]
    assert b"return total" in data[last.start_byte : last.end_byte]
    assert last.context.startswith("def score")  # not inside the loop any more


def test_fragments_of_a_function_never_join_the_next_definition() -> None:
    _, analysis = run("two.py", f"""
def score(items):
    total = 0
    for item in items:
{LOOP_BODY}
    return total

def tiny():
    return 1
""")
    assert [c.symbol for c in analysis.chunks][-1] == "tiny"
    assert "score" not in analysis.chunks[-1].symbol


def test_a_section_comment_joins_a_definition_but_a_main_guard_does_not() -> None:
    data, analysis = run("sections.py", f"""
class Parser:
    def first(self, items):
{BIG_BODY.replace("    ", "        ", 1).replace(chr(10) + "    ", chr(10) + "        ")}
        return total

    # -- the parsing methods ---------------------------------------------

    def second(self, items):
{BIG_BODY.replace("    ", "        ", 1).replace(chr(10) + "    ", chr(10) + "        ")}
        return total


if __name__ == "__main__":
    Parser().first([])
""")
    (section,) = [c for c in analysis.chunks if b"# -- the parsing" in data[c.start_byte : c.end_byte]]
    assert b"def second" in data[section.start_byte : section.end_byte]  # not a chunk of its own
    assert section.symbol == "Parser.second"  # the comment introduces what follows
    assert analysis.chunks[-1].symbol == "<module>" and b"__main__" in data[analysis.chunks[-1].start_byte :]
