"""The answer to each request, one module per kind of question; `goals/` (goal states,
batches, columns, agreement with the diagnostics, prefetch) and `trials/` (`try`:
placement, candidates, judging, applying, the goal diff); the cache of settled answers
and its fast path. Knows no sockets, no rendering.
"""
