"""Ranking: from the dense and sparse candidate lists to the top k results.

Stages that reorder, merge (:mod:`gitrag.query.ranking.pieces`) or group ranked chunks.

    question -> :func:`analyse` (type, code names, long-question parts)
    -> dense list + sparse list (retrieval asks the store for each)
    -> :func:`rank`: fusion weighted by query type -> definitions -> path match
       -> coherence -> path priors -> greedy top-k with file saturation
    -> optional graph expansion (:func:`expand`)

Each stage is named in :data:`STAGES` and can be switched off (``gitrag eval --ablate``);
the constants and the reasons for them are in :mod:`gitrag.query.ranking.stages`, the measured
effect of each stage in BENCHMARKS.md. Pure code: the index is reached only through the
:class:`Lookup` that retrieval passes in.
"""

from gitrag.query.ranking.expand import expand
from gitrag.query.ranking.pipeline import STAGES, Lookup, check, rank, written_paths
from gitrag.query.ranking.query import Query, analyse, query_identifiers
from gitrag.query.ranking.stages import Candidate, DefinitionSite

__all__ = ["STAGES", "Candidate", "DefinitionSite", "Lookup", "Query", "analyse", "check", "expand", "query_identifiers",
           "rank", "written_paths"]
