"""`holctl lsp`: an LSP endpoint an editor starts in place of `hol lsp`, routed onto the daemon's servers."""
