from __future__ import annotations

from gitrag.surfaces.entry import main

if __name__ == "__main__":
    main()
