"""One HOL server for one script: its child and LSP client, its session (sync, ask, wait),
notifications folded into its file's state and handed to listeners, the text it should
have (an editor's buffer or the disk's), its status row, the gate a trial holds.
"""
