"""What the editor asked of HOL's configuration (`$/setConfig`), applied to the editor's view alone.

HOL's configuration is one per server process, and the daemon's server for
a file is the agents' too: sending the editor's `$/setConfig` would change
what every agent gets (checking switched off, compiles only on save).  So
`holctl lsp` answers it itself and keeps its effect on this editor:

* `checkProofs: false` hides `$/proofStates` from the editor; the server
  goes on checking for the agents (proof diagnostics still come).
* `elabOn` 0 or 2 sends the buffer to the server only when it is saved
  (HOL's 0 would never compile on its own; here a save does).
* `hoverWidth` is the shared server's and is not changed (a log line says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# HOL's `elabOn` values: compile never on its own, on each change, on save.
NEVER, ON_CHANGE, ON_SAVE = 0, 1, 2


@dataclass
class View:
    check_proofs: bool = True
    elab_on: int = ON_CHANGE

    def configure(self, params: dict[str, Any]) -> str:
        """Take a `$/setConfig`'s params; a line for the editor's log about what is not applied, or ""."""
        if isinstance(params.get("checkProofs"), bool):
            self.check_proofs = params["checkProofs"]
        if params.get("elabOn") in (NEVER, ON_CHANGE, ON_SAVE):
            self.elab_on = params["elabOn"]
        if "hoverWidth" in params:
            return f"ignoring hoverWidth {params['hoverWidth']}: the HOL server is shared with agents (holsrv)"
        return ""

    @property
    def sends_changes(self) -> bool:
        """Whether an edit goes to the server at once (else at the next save)."""
        return self.elab_on == ON_CHANGE

    def shows(self, method: str) -> bool:
        """Whether a notification of `method` reaches the editor."""
        return self.check_proofs or method != "$/proofStates"
