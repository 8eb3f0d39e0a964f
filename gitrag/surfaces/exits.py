"""Errors become exit codes here and only here (see ``gitrag.errors``): :func:`run` runs a
command and exits with its code. Imports no click, so the quick ``ask`` route
(:mod:`gitrag.surfaces.entry`) and the click commands (:mod:`gitrag.surfaces.cli`) share it.
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable
from typing import NoReturn

from gitrag.errors import EXIT_ERROR, EXIT_INTERNAL, EXIT_INTERRUPT, GitragError


def run(fn: Callable[[], int]) -> NoReturn:
    """Run a command and exit with its code; the one place errors become exit codes
    (``gitrag.errors``: a GitragError's own code, EXIT_INTERRUPT on Ctrl-C, EXIT_ERROR for a
    refused or too-long path or a damaged database, EXIT_INTERNAL for a bug, its traceback
    in the state folder's crash.log)."""
    try:
        code = fn()
    except GitragError as exc:
        from gitrag.surfaces import output

        output.error(str(exc))
        code = exc.exit_code
    except KeyboardInterrupt:
        code = EXIT_INTERRUPT
    except OSError as exc:
        code = _os_error(exc)
    except Exception as exc:  # noqa: BLE001 - an unexpected bug: say where the traceback is
        code = _damaged_database(exc) or _internal_error()
    sys.exit(code)


def _damaged_database(exc: Exception) -> int:
    """A SQLite file found damaged in the middle of a command (the vector cache heals itself;
    this is a repository's ``state.db``): one line with the fix, EXIT_ERROR; 0 for any other error."""
    sqlite3 = sys.modules.get("sqlite3")
    if sqlite3 is None or not isinstance(exc, sqlite3.DatabaseError):
        return 0
    from gitrag.index.vector_cache import is_malformed
    from gitrag.surfaces import output

    if not is_malformed(exc):
        return 0
    output.error(f"a gitrag database is damaged ({exc}): `gitrag index --rebuild` rebuilds it from git and the "
                 "vector cache (`gitrag doctor --deep` names it)")
    return EXIT_ERROR


def _os_error(exc: OSError) -> int:
    """A path the system refuses as too long is the user's to fix (a deep GITRAG_HOME, a long
    XDG folder), and so is a read-only file system or a missing permission: one line saying
    what to set or fix. Any other OSError is a bug."""
    from gitrag import config
    from gitrag.surfaces import output

    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        output.error(config.refused(exc))
        return EXIT_ERROR
    if exc.errno != errno.ENAMETOOLONG:
        return _internal_error()

    output.error(f"a path is too long for the system: {exc.filename or exc}; set GITRAG_HOME "
                 f"(or XDG_DATA_HOME, XDG_STATE_HOME) to a shorter folder")
    return EXIT_ERROR


def _internal_error() -> int:
    import traceback

    from gitrag import config
    from gitrag.surfaces import output

    try:
        log_dir = config.state_dir()
        config.private_mkdir(log_dir)  # tracebacks name paths: private
        path = log_dir / "crash.log"
        with path.open("a") as fh:
            fh.write(traceback.format_exc() + "\n")
        where = f"; the traceback is in {path}"
    except (OSError, GitragError):
        where = ""
        traceback.print_exc()
    output.error(f"unexpected internal error: {sys.exc_info()[1]!r}{where}; please report it")
    return EXIT_INTERNAL
