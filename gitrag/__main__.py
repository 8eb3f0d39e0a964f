from __future__ import annotations

from gitrag.cli import main

if __name__ == "__main__":
    main()
