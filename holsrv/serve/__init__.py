"""The daemon's connections: one connection's hello and requests in order, the open
connections and their limits, an editor's channel, what systemd hands a service.
"""
