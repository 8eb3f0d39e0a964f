"""Layer 4, daemon (the service): the process that keeps indexes current, and its clients.

    protocol  wire format and file locations (standard library only)
    client    request()/probe() used by the CLI and the notifier (standard library only)
    spool     events written while no daemon answered (standard library only)
    registry  the repositories kept current (standard library only)
    server    asyncio unix-socket transport: peer check, one JSON line per request
    service   the commands (cmd_<op>) and event intake
    worker    one per repository: coalesced syncs on its own thread
    jobs      apscheduler: debounce, reconcile, gc
    status    the status JSON of one repository (daemon and CLI)
    run       lifecycle: lock, stale socket, signals, spool drain, clean exit
    systemd   the user unit
    notify    what the git hooks run (standard library only; gitrag.notify is its entry point)
    gc        garbage collection of repository indexes (full and scheduled passes)
"""
