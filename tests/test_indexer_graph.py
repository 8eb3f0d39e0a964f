"""The symbol graph the indexer stores per blob is ``asdict`` of the chunker's facts.

``indexer._flat_dicts`` replaces ``dataclasses.asdict`` (a deep copy) for speed; the
stored JSON must not change, or cached graphs would differ between versions.
"""

from __future__ import annotations

import json
import sysconfig
from dataclasses import asdict
from pathlib import Path

from gitrag.index.chunking import analyze
from gitrag.index.indexer import _graph


def test_graph_is_asdict_of_definitions_and_references() -> None:
    checked = 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[::20]:
        analysis = analyze(path.name, path.read_bytes())
        expected = {
            "language": analysis.language,
            "definitions": [asdict(d) for d in analysis.definitions],
            "references": [asdict(r) for r in analysis.references],
        }
        assert json.dumps(_graph(analysis)) == json.dumps(expected)
        checked += len(analysis.definitions) + len(analysis.references)
    assert checked > 500
