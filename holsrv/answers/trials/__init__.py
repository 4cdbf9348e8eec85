"""`try`: where a candidate goes (placement), running candidates in the server's copy of
the text, judging each, writing the proved one (apply), and the goal diff of what a
tactic did.
"""
