"""Layer 5, surfaces: what users and agents call.

    cli        argument parsing and dispatch; exit codes in one place
    commands   one module per verb, each one function returning an exit code
    mcp        the MCP server for coding agents
    output     every write to the user (rich on a terminal, plain or JSON off it)
"""
