"""The small repository whose vector cache ``tests/data/cache-format1.db`` holds: written by
gitrag at commit 83e0fdf (cache format 1: float32 ``WITHOUT ROWID`` rows, no digest) with
the ``hash`` test embedder, by::

    GITRAG_HOME=$(mktemp -d) GITRAG_EMBEDDER=hash python -c \
        'import tests.format1_repo as f; f.make("/tmp/f1")' && gitrag index --repo /tmp/f1
    cp $GITRAG_HOME/data/cache.db tests/data/cache-format1.db   # after `PRAGMA wal_checkpoint`

``make`` writes the same files, so a test can index them against that cache.
"""

from __future__ import annotations

from pathlib import Path

FILES = {
    "pkg/__init__.py": '"""A tiny package."""\n',
    "pkg/shapes.py": (
        "import math\n\n\n"
        "def circle_area(radius):\n    \"\"\"Area of a circle.\"\"\"\n    return math.pi * radius * radius\n\n\n"
        "def square_area(side):\n    \"\"\"Area of a square.\"\"\"\n    return side * side\n\n\n"
        "class Rectangle:\n    def __init__(self, w, h):\n        self.w, self.h = w, h\n\n"
        "    def area(self):\n        return self.w * self.h\n"
    ),
    "pkg/net.py": (
        "import socket\n\n\n"
        "def open_connection(host, port, timeout=3.0):\n    \"\"\"Connect to host:port.\"\"\"\n"
        "    return socket.create_connection((host, port), timeout=timeout)\n\n\n"
        "def parse_url(url):\n    scheme, _, rest = url.partition('://')\n    host, _, path = rest.partition('/')\n"
        "    return scheme, host, '/' + path\n"
    ),
    "README.md": "# tiny\n\nShapes and a socket helper. Compute the area of a circle with `circle_area`.\n",
}


def make(path: str | Path) -> None:
    """Write FILES under ``path`` and commit them (a fresh git repository)."""
    from tests.gitutil import Repo

    repo = Repo(Path(path))
    for rel, text in FILES.items():
        repo.write(rel, text)
    repo.commit("tiny")
