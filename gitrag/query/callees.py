"""Which symbol-graph links ``ask --expand`` may show as "used by": the graph resolves a call by
name (gitrag.index.symbols: "expect some false edges"), which is fine for navigation but not
for results shown as called by a top result. A new user saw a test's same-named method
offered as the callee of implementation code. Two rules, each from what the source says:

- code outside tests does not call into tests: a definition in a test file (the ranking's
  test path rule) is not a callee of a result outside tests, whatever its name;
- a call through an object of unknown type (``runner.execute()``, resolved by the name
  ``execute`` alone) names no class; it is linked to a method only when the receiver's name
  names the method's class (``runner`` -> ``Runner``, ``self._store`` -> ``EdgeStore``) or
  the caller is a method of that class (Go's ``func (s *Server) Start() { s.flush() }``).
  A bare call found by name reaches a method only in its own file (a nested function, an
  implicit ``this``). Functions and classes found by name (``compute()``, ``Runner()``) stay.
"""

from __future__ import annotations

import re

from gitrag.index.symbols import Link, split_name
from gitrag.query.ranking.stages import is_test_path


def _receiver(target: str) -> str:
    """The last name before the called one: ``self._store.put()`` -> ``store``; "" for a bare call."""
    segs = split_name(re.sub(r"\([^()]*\)", "", target.strip()))
    return segs[-2].strip("_").lower() if len(segs) > 1 else ""


def plausible(link: Link, caller_path: str, caller_symbol: str = "") -> bool:
    """Whether ``link`` (a callee or base of the result at ``caller_path``, whose symbol is
    ``caller_symbol``, e.g. ``Server.start``) may be shown as one."""
    d = link.definition
    if d is None:
        return False
    if is_test_path(d.path) and not is_test_path(caller_path):
        return False
    if link.how != "name" or not d.parent or d.kind not in ("method", "function"):
        return True
    receiver = _receiver(link.name)
    if not receiver:  # a bare call: a nested function, or a method through an implicit this (Java, C++): same file
        return d.path == caller_path
    cls = split_name(d.parent)[-1] if split_name(d.parent) else ""
    own = split_name(caller_symbol)[-2:-1]  # a method calling through its own receiver (Go's `s.flush()`)
    if own and own[0] == cls:
        return True
    return len(receiver) >= 3 and cls.lower().endswith(receiver)
