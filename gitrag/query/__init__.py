"""Layer 3, query: from a question to ranked, citable code locations.

    retrieval   dense + sparse candidates from the store, fused (RRF), checked
    ranking     the ranking stages over candidates (pure functions with their reasons)
    answer      the answer writer: snippets, freshness line, JSON
    results, file_results   the result shapes a light client reads
    worktree, revisions, related, history, blame, evaluation
    prefixes    a --path / path_prefix that names no indexed file: the line, the nearest ones

Imports go down to :mod:`gitrag.index` and :mod:`gitrag.git` only.
"""
