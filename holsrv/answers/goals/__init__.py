"""goalState's answers: at a position or around a line's tactics, many positions in one
call, the columns asked, agreement with the file's diagnostics, and goal states asked
for before an agent asks (prefetch).
"""
