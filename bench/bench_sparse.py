"""Sparse vectors, side by side: another checkout's ``gitrag/index/sparse.py`` vs this one's.

    python bench/bench_sparse.py CORPUS OTHER_SPARSE_PY

Cuts every tracked file of the git repository CORPUS into 1,500-character slices, builds
``document_vector`` of each with both modules, prints CPU seconds of each and their ratio,
and checks the vectors are identical (indices and float values).
"""
import importlib.util
import subprocess
import sys
import time
from pathlib import Path

from gitrag.index import sparse

repo, other = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("other_sparse", other)
base = importlib.util.module_from_spec(spec)
spec.loader.exec_module(base)
files = subprocess.run(["git", "ls-files"], cwd=repo, capture_output=True, text=True, check=True).stdout.split()
texts = []
for f in files:
    t = Path(repo, f).read_text(encoding="utf-8", errors="replace")
    texts += [t[i:i + 1500] for i in range(0, len(t), 1500)]
t0 = time.process_time()
a = [base.document_vector(t) for t in texts]
t1 = time.process_time()
b = [sparse.document_vector(t) for t in texts]
t2 = time.process_time()
assert all((x.indices, x.values) == (y.indices, y.values) for x, y in zip(a, b)), "vectors differ"
print(f"{len(texts)} texts: other {t1 - t0:.2f} CPU-s, this {t2 - t1:.2f} CPU-s "
      f"({(t1 - t0) / (t2 - t1):.1f}x), identical")
