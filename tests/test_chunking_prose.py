"""Prose shares: how much of each chunk is comments and docstrings, on real grammars."""

from __future__ import annotations

from pathlib import Path

from gitrag.index.chunking import analyze
from gitrag.index.chunking.prose import prose_shares
from gitrag.index.workspace import open_workspace
from tests.gitutil import Repo, index

WRAPPER = '''def total(cart):
    """The cart's total: every line's price times its quantity, summed,
    then the cart's discount taken off and the result rounded to cents.
    Raises ValueError for a negative quantity."""
    return _total(cart)


def _total(cart):
    value = sum(price * qty for price, qty in cart.lines)
    return round(value - cart.discount, 2)
'''


def by_symbol(path: str, data: str, **kw: int) -> dict[str, float]:
    return {c.symbol: c.prose for c in analyze(path, data.encode(), **kw).chunks}


def test_a_python_docstring_is_prose_and_code_is_not() -> None:
    shares = by_symbol("shop/cart.py", WRAPPER)
    assert shares["total"] > 0.7  # all but the def line and one call
    assert shares["_total"] == 0.0


def test_comments_are_prose_in_every_grammar() -> None:
    js = by_symbol("a.js", "// Sum the cart: every price times its quantity, and the\n// discount taken off.\n"
                   "function total(cart) {\n  return cart.lines.reduce((s, l) => s + l.p * l.q, 0);\n}\n")
    rust = by_symbol("a.rs", "/// Sum the cart: every price times its quantity, and the discount taken off.\n"
                     "fn total(c: &Cart) -> f64 {\n    c.sum()\n}\n")
    go = by_symbol("a.go", "package cart\n\n/* Sum the cart: every price times its quantity. */\n"
                   "func Total(c Cart) float64 {\n\treturn c.Sum()\n}\n")
    assert 0.3 < max(js.values()) < 1.0
    assert 0.3 < max(rust.values()) < 1.0
    assert 0.2 < max(go.values()) < 1.0


def test_a_string_that_is_not_a_statement_is_code() -> None:
    shares = by_symbol("a.py", 'def greet(name):\n    message = "Hello there, %s, and welcome to the shop" % name\n'
                       '    return message\n')
    assert shares["greet"] == 0.0


def test_files_without_a_grammar_or_with_syntax_errors_have_no_prose_share() -> None:
    assert set(by_symbol("README.md", "# Cart\n\nThe cart sums every line.\n").values()) == {0.0}
    assert set(by_symbol("bad.py", 'def f(:\n    """A docstring in a broken file."""\n').values()) == {0.0}


def test_shares_count_non_whitespace_bytes_of_each_span() -> None:
    data = b"ab  # cd\nef"
    ranges = [(4, 8)]  # "# cd": 3 of the 5 non-whitespace bytes of the first line
    assert prose_shares(data, ranges, [(0, 9), (9, 11)]) == [0.6, 0.0]
    assert prose_shares(data, ranges, [(0, 2), (2, 4), (4, 9), (9, 11)]) == [0.0, 0.0, 1.0, 0.0]


def test_the_prose_share_reaches_the_point_payload(repo: Repo, tmp_path: Path) -> None:
    repo.write("shop/cart.py", WRAPPER)
    repo.commit("cart")
    index(repo.path)
    with open_workspace(repo.path) as ws:
        branch = ws.state.branch("main")
        hits = ws.store.search(branch.collection, dense=ws.embedder.embed_query("cart total"), sparse=None, limit=10,
                               branch=branch.view)
        shown = ws.state.payloads(h.id for h in hits)  # what a query shows: the manifest rows
    assert hits and all("prose" not in h.payload for h in hits)  # the store keeps the filter fields only
    payloads = {p["symbol"]: p for p in shown.values()}
    assert payloads["total"]["prose"] > 0.7
    assert "prose" not in payloads["_total"]  # no prose: no field
