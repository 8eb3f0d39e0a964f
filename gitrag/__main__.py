from __future__ import annotations

from gitrag.surfaces.cli import main

if __name__ == "__main__":
    main()
