"""A script's text and the facts read from it: the scanners (masking, proof blocks, cheats,
the Ancestors header, where two texts differ), positions in either encoding, the facts
computed once per text and their memo, and the stepping driver that runs work
proportional to a text's size in slices. Knows no HOL, no process, no disk.
"""
