"""One child process on its own: spawned in its group under a watchdog, its exit watch and
stop escalation, its stderr ring and memory footprint; Holmake runs as such children.
"""
