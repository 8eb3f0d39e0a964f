"""Where the ``gitrag`` process starts (the console script and ``python -m gitrag``): the
streams made safe, then the hook's ``notify`` and the plain forms of ``gitrag ask`` run
without importing click (about 40 ms of a client's CPU), and every other command line is
click's (:mod:`gitrag.surfaces.cli`).
"""

from __future__ import annotations

import sys

from gitrag.surfaces import streams


def main() -> None:
    """Run the command ``sys.argv`` names and exit with its code (``gitrag.surfaces.exits``)."""
    streams.tolerant_streams()
    streams.pipe_safe_streams()
    argv = sys.argv[1:]
    if argv[:1] == ["notify"] and not {"-h", "--help"} & set(argv[1:2]):
        # the hook path: no click parsing, no logging set-up (help is click's, like every command's)
        from gitrag.daemon.notify import main as notify_main

        sys.exit(notify_main(argv[1:]))
    if argv[:1] == ["ask"]:
        from gitrag.surfaces.args import quick_ask

        params = quick_ask(argv[1:])
        if params is not None:
            from gitrag import logs
            from gitrag.surfaces import exits
            from gitrag.surfaces.commands.ask import from_options

            logs.configure_when_used("warning")  # as the click group does without -v
            exits.run(lambda: from_options(params))
    from gitrag.surfaces.cli import cli

    cli(prog_name="gitrag")
