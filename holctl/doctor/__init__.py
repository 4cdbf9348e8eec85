"""`holctl doctor`: what a new installation needs, checked one line at a time.

Each module checks one thing (`hol`, `scripts`, `daemon`, `systemd`,
`hosts`) and returns `report.Check`s; `holctl.commands.doctor` runs them in
order and prints the report.  Nothing here starts the daemon or changes a
file: the only process a check starts is the short `hol lsp` handshake, and
it is stopped before the check returns.
"""
