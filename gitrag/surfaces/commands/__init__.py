"""One module per command; each exposes one function returning an exit code."""
