"""`holctl lsp`: the command an editor starts in place of `hol lsp` (see `holctl.lsp`)."""

from __future__ import annotations

import click

from holctl.calls import EXIT_CODES, Target


@click.command("lsp", epilog=EXIT_CODES)
@click.option("--lsp-check-proofs", is_flag=True, hidden=True,
              help="Accepted for `hol lsp`'s command line; proofs are always checked.")
@click.pass_obj
def lsp(target: Target, lsp_check_proofs: bool) -> None:
    """Speak LSP on stdin/stdout to one editor, as `hol lsp --lsp-check-proofs` does, on the daemon's servers.

    Point the editor's HOL4 language-server command at `holctl lsp`: each
    script it opens is checked by the daemon's server for that file (started
    if needed), shared with the agents. While the editor has unsaved
    changes, agents' answers are about the editor's text and say so.
    """
    # Imported here: the bridge runs an event loop, which no other command loads.
    from holctl.lsp import main

    main.run(target.socket, target.autostart)


COMMANDS = [lsp]
