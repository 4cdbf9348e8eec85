"""What HOL said about a file, turned into the diagnostics answer: the file's state
machine, the census of proofs, the tally, each proof's status, the diagnostics as
listed, compile errors, hints, what is still outstanding, slow and looping proofs, the
verdict word and headline. Pure: no process, no socket.
"""
