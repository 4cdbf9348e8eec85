"""The answer to each request, one module per kind of question.

`diagnostics` (the verdict and its settle loop), `goals` (goal states),
`lookups` (hover, definition, references, completion, symbols) and
`control` (eval, retryCompile, restart); `common` holds what they share.
The daemon's dispatch calls them directly.
"""
