"""The settings a user and an operator set, where each value came from (flags, environment,
config file), finding `hol` and `Holmake`, the memory the box has.
"""
