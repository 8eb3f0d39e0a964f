"""Ranking stages for code restated elsewhere (generated copies, import lists) and for the Python
modules a pasted issue imports (issue 20)."""

from __future__ import annotations

from gitrag.query.ranking import Candidate, analyse, rank
from gitrag.query.ranking.restated import is_copy, is_imports
from tests.test_ranking import Lookup, cand


def test_an_amalgamation_ranks_below_the_header_it_copies() -> None:
    assert is_copy("singleheader/simdjson.h") and is_copy("single_include/lib/lib.hpp")
    assert is_copy("dist/sqlite3-amalgamation.c") and not is_copy("include/simdjson/dom/element.h")
    cands = [cand("copy", "singleheader/simdjson.h", dense=0.9, sparse=9.0),
             cand("orig", "include/simdjson/dom/element.h", dense=0.8, sparse=8.0),
             cand("low", "src/other.cpp", dense=0.1, sparse=1.0)]
    q = "element get_int64 returns the wrong error for a big number"
    off = ("coherence", "saturation", "path-match")
    assert [c.key for c in rank(analyse(q), cands, 3, Lookup(), off)] [:2] == ["orig", "copy"]
    assert [c.key for c in rank(analyse(q), cands, 3, Lookup(), (*off, "copies"))][:2] == ["copy", "orig"]
    asked = "the single header build fails: " + q
    assert [c.key for c in rank(analyse(asked), cands, 3, Lookup(), off)][:2] == ["copy", "orig"]


def test_an_import_list_ranks_below_the_code_using_the_names() -> None:
    assert is_imports("<imports>") and is_imports("<imports>, <exports>") and not is_imports("parse, <imports>")
    imports = Candidate("imp", "pkg/parser.py", 1, 6, "<imports>", dense=0.9, sparse=9.0)
    code = Candidate("fn", "pkg/parser.py", 20, 60, "parse_link_destination", dense=0.8, sparse=8.0)
    low = Candidate("low", "pkg/other.py", 1, 9, "other", dense=0.1, sparse=1.0)
    q = "Link destination with angle brackets is parsed wrongly\n\n```python\nfrom pkg.parser import parse\n```\n"
    off = ("coherence", "saturation", "path-match", "modules")
    assert [c.key for c in rank(analyse(q), [imports, code, low], 3, Lookup(), off)][:2] == ["fn", "imp"]
    assert [c.key for c in rank(analyse(q), [imports, code, low], 3, Lookup(), (*off, "imports"))][:2] == ["imp", "fn"]
    titled = "Circular import of the parser module\n\nIt fails at start."
    assert [c.key for c in rank(analyse(titled), [imports, code, low], 3, Lookup(), off)][0] == "imp"
    typed = "where is parse exported"  # a typed question: an import block may be the answer
    assert [c.key for c in rank(analyse(typed), [imports, code, low], 3, Lookup(), off)][0] == "imp"


def test_a_pasted_reproduction_s_imports_raise_the_subsystem_it_exercises() -> None:
    from gitrag.query.ranking.modules import module_names

    issue = ("collect_factor_and_dimension does not detect equivalent dimensions\n\n```python\n"
             "from sympy.physics.units.systems.si import SI\nimport numpy as np\nfrom sympy import *\n"
             "v1 = units.Quantity('v1')\nSI.set_quantity_dimension(v1, units.velocity)\n```\n")
    assert module_names(issue) == ["sympy.physics.units.systems.si", "sympy.physics.units.systems.si.SI"]
    near = cand("near", "sympy/physics/units/unitsystem.py", dense=0.5, sparse=5.0)
    central = cand("central", "sympy/core/numbers.py", dense=0.6, sparse=6.0)
    low = cand("low", "sympy/utilities/misc.py", dense=0.1, sparse=1.0)
    lookup = Lookup(chunks=[near, central, low, cand("si", "sympy/physics/units/systems/si.py")])
    off = ("coherence", "saturation", "path-match")
    assert [c.key for c in rank(analyse(issue), [near, central, low], 3, lookup, off)][0] == "near"
    assert [c.key for c in rank(analyse(issue), [near, central, low], 3, lookup, (*off, "modules"))][0] == "central"
    typed = "where is the dimension of a sum checked"  # no reproduction: nothing to read
    assert [c.key for c in rank(analyse(typed), [near, central, low], 3, lookup, off)][0] == "central"
