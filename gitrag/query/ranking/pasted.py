"""Names in a pasted issue that the repository defines only in tests, examples or docs.

An issue's reproduction defines its own classes and functions (``public static class DTO``,
``class Pojo``, ``def test_it``) and names the library's API it calls. The repository's own
tests define the same kind of names (jackson-dataformat-xml's test suite has a ``Pojo`` in
dozens of files), so the definition boost (3x the top score, gitrag.query.ranking.stages)
lifted a test fixture that shares a name with the reporter's code above the code the fix
changes: on the localization sets, Java test files were first for issues whose reproduction
defines a ``Pojo`` or a ``VirtualBeanPropertyWriterTest``. The boost says "this is the
definition the question is about"; for a pasted text (an issue, a log) that is an
implementation, and a definition in a file the path priors mark as not implementation
(tests, examples, docs, type declarations, generated or vendored code; ``__init__.py``
re-exports are implementation here) is not what the reporter means, unless the title asks
for it ("test X fails" lifts the test prior). Stage ``pasted-names``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePosixPath

from gitrag.query.ranking.query import Query
from gitrag.query.ranking.stages import INIT_PRIOR, MAX_DEFINITIONS, DefinitionSite, asks_of, is_pasted, path_prior

Definitions = Callable[[str, bool], list[DefinitionSite]]


def implementation_definitions(definitions: Definitions, query: Query) -> Definitions:
    """``definitions`` (name, exact case -> sites) without the sites in non-implementation
    files (:func:`gitrag.query.ranking.stages.path_prior` below 1, ``__init__.py`` aside)
    when ``query`` is pasted text; ``definitions`` itself for a typed question. A name with
    more than ``MAX_DEFINITIONS`` sites keeps them all: it is ambiguous (``main``, defined
    in every example and test binary), and leaving out the tests' must not make it look
    specific (on rayon, three ``main`` functions of its CI crates then won the boost)."""
    if not is_pasted(query):
        return definitions
    asks = asks_of(query)
    cache: dict[str, bool] = {}

    def implementation(path: str) -> bool:
        if path not in cache:
            prior = path_prior(path, asks)
            if PurePosixPath(path).name == "__init__.py":
                prior /= INIT_PRIOR
            cache[path] = prior >= 1.0
        return cache[path]

    def filtered(name: str, exact_case: bool) -> list[DefinitionSite]:
        sites = definitions(name, exact_case)
        if len(sites) > MAX_DEFINITIONS:
            return sites  # ambiguous in the repository as a whole (``main``): the stage skips it as before
        return [s for s in sites if implementation(s.path)]

    return filtered
