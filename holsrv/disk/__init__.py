"""A user's files on disk: reading a script (one stat when unchanged), the one writer,
`holproject.toml` projects, inotify watches, and the build times of a script's ancestor
theories.
"""
