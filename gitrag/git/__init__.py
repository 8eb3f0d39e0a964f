"""Layer 1, git: everything that reads a repository or writes into it.

    repo      GitRepo: the one adapter over pygit2 (refs, trees, blobs, diffs, work tree)
    log       commits and the paths they touch, for the history index
    hooks     the hook scripts `gitrag install` writes and `gitrag uninstall` removes
    hookenv   the environment hooks run in, and the log of events they drop (standard library only)

This package's ``__init__`` imports nothing: the hook path imports :mod:`hookenv` through it.
"""
