"""The wire: the messages that cross the daemon's socket, their framing, the clients' call
protocol and connections (blocking and asyncio), starting a daemon on demand, socket
paths, request limits, wording. Standard library and msgspec only, so clients start
fast; knows nothing of asyncio servers or HOL.
"""
