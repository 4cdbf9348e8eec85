"""The client of one `hol lsp`: Content-Length framing, JSON-RPC ids and futures, HOL's
replies as Structs, its quirks as named predicates, its requests as typed calls. Knows
nothing of the daemon's wire or the pool.
"""
