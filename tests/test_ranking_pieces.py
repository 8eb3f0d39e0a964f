"""Merging pieces of one definition and ranking files: pure functions on hand-made results."""

from __future__ import annotations

from gitrag.query.file_results import rank_files
from gitrag.query.ranking.pieces import merge_pieces
from gitrag.query.retrieval import Result


def res(path: str, start: int, end: int, symbol: str, score: float, *, blob: str = "b1", expanded: str = "") -> Result:
    """A result whose bytes are its lines times 10 (lines [start, end] -> bytes [10s-10, 10e))."""
    return Result(path, start, end, symbol, "function", "python", score, blob=blob,
                  start_byte=10 * (start - 1), end_byte=10 * end, point_id=f"{path}:{start}", expanded_from=expanded)


def spans(results: list[Result]) -> list[tuple[str, int, int, float]]:
    return [(r.path, r.start_line, r.end_line, r.score) for r in results]


def test_touching_pieces_merge_at_the_best_place_with_the_best_score() -> None:
    got = merge_pieces([
        res("a.py", 11, 20, "f", 0.9), res("b.py", 1, 5, "g", 0.8),
        res("a.py", 1, 10, "f", 0.7), res("a.py", 21, 30, "f", 0.5),
    ])
    assert spans(got) == [("a.py", 1, 30, 0.9), ("b.py", 1, 5, 0.8)]
    assert got[0].point_id == "a.py:11" and (got[0].start_byte, got[0].end_byte) == (0, 300)


def test_gaps_other_symbols_other_blobs_and_expansions_stay_apart() -> None:
    results = [
        res("a.py", 1, 10, "f", 0.9), res("a.py", 21, 30, "f", 0.8),  # piece 11-20 did not rank
        res("a.py", 11, 20, "g", 0.7),  # touches both, but another symbol
        res("c.py", 1, 10, "h", 0.6), res("c.py", 11, 20, "h", 0.5, blob="b2"),  # another version
        res("d.py", 1, 10, "k", 0.4), res("d.py", 11, 20, "k", 0.3, expanded="x.py:1-2"),
    ]
    assert spans(merge_pieces(list(results))) == spans(results)


def test_overlapping_pieces_merge() -> None:
    got = merge_pieces([res("a.py", 5, 15, "f", 0.3), res("a.py", 1, 10, "f", 0.6)])
    assert spans(got) == [("a.py", 1, 15, 0.6)]


def test_files_rank_by_aggregated_chunk_evidence_then_by_matches_then_path() -> None:
    results = [
        res("one.py", 1, 5, "a", 0.9), res("two.py", 1, 5, "b", 0.5), res("three.py", 1, 5, "c", 0.5),
        res("three.py", 9, 12, "d", 0.2), res("one.py", 30, 40, "e", 0.4), res("one.py", 50, 60, "f", 0.3),
        res("one.py", 70, 80, "g", 0.1), res("four.py", 1, 5, "h", 0.4), res("four.py", 9, 12, "i", 0.2),
    ]
    files = rank_files(results, k=3, per_file=3)
    # best + 0.25 x second + 0.0625 x third: one 0.9+0.1+0.01875, three 0.5+0.05, two 0.5, four 0.4+0.05
    assert [(f.path, f.score, f.matches) for f in files] == [("one.py", 1.01875, 4), ("three.py", 0.55, 2),
                                                            ("two.py", 0.5, 1)]
    assert [(c.start_line, c.symbol, c.score) for c in files[0].chunks] == [(1, "a", 0.9), (30, "e", 0.4), (50, "f", 0.3)]
    assert [f.path for f in rank_files(results, k=1)] == ["one.py"]
    # a file answering in several places outranks one lucky chunk; chunks=1 is the best chunk alone
    several = [res("lucky.py", 1, 5, "x", 0.6), res("many.py", 1, 5, "y", 0.5), res("many.py", 9, 12, "z", 0.5)]
    assert [f.path for f in rank_files(several, k=2)] == ["many.py", "lucky.py"]
    assert [f.path for f in rank_files(several, k=2, chunks=1)] == ["lucky.py", "many.py"]
    assert rank_files([], k=5) == []


def test_pieces_of_a_definition_are_its_touching_chunks_of_one_symbol() -> None:
    from gitrag.query.ranking.pieces import pieces_of

    def p(symbol: str, start: int, end: int, blob: str = "b1") -> dict:
        return {"symbol": symbol, "blob": blob, "start_byte": start, "end_byte": end}

    chunks = [("a", p("run", 0, 100)), ("b", p("run", 100, 200)), ("c", p("run", 200, 260)),
              ("d", p("help", 260, 300)), ("e", p("run", 400, 500)),  # a second "run" further down: another definition
              ("f", p("run", 100, 200, blob="b2"))]
    assert pieces_of(chunks, "b") == {"a", "b", "c"}
    assert pieces_of(chunks, "e") == {"e"}
    assert pieces_of(chunks, "d") == {"d"}
    assert pieces_of([("x", p("", 0, 10)), ("y", p("", 10, 20))], "x") == {"x"}  # no symbol: no definition
    assert pieces_of(chunks, "zz") == {"zz"}
