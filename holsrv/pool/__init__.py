"""The servers by script and their leases: admission on measured memory, LRU and idle
eviction, stopping, a file's history across servers, a dead daemon's leftovers,
replacement by a successor after a rebuild, retrying a blocked compile, staleness, the
script watch and the diagnostics computed ahead of a call.
"""
