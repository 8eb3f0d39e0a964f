"""Retrieval evaluation: question sets, metrics, the grep baselines, the runner, tables.

Pure library code (it only reads label files and, for the grep baseline, git objects);
``gitrag eval`` in the CLI wires it to the real search modes.
"""

from __future__ import annotations

from gitrag.query.evaluation.datasets import (
    SEMBLE_ROOTS,
    Dataset,
    DatasetError,
    Question,
    Target,
    load_click_jsonl,
    load_dataset,
    load_semble_json,
)
from gitrag.query.evaluation.metrics import METRICS, Result, score_question
from gitrag.query.evaluation.runner import FILE_LEVEL_MODES, EvalReport, mean_over_reports, run_dataset, run_eval

__all__ = [
    "FILE_LEVEL_MODES",
    "METRICS",
    "SEMBLE_ROOTS",
    "Dataset",
    "DatasetError",
    "EvalReport",
    "Question",
    "Result",
    "Target",
    "load_click_jsonl",
    "load_dataset",
    "load_semble_json",
    "mean_over_reports",
    "run_dataset",
    "run_eval",
    "score_question",
]
