"""Many clients at once, each on its own persistent connection, asking one request again and again.

Run as a subprocess by the benchmark (so its CPU is not the benchmark's):

    python bench/load.py SOCKET REQUEST_FILE CONNECTIONS SECONDS

REQUEST_FILE holds one request frame.  Each connection sends the hello, then
the request, waits for the reply frame, and again, until SECONDS have passed
(after a short warm-up that is not counted).  Prints one JSON object: the
replies per second over all connections, and each connection's count, median
and 99th percentile latency.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import uvloop

from holsrv.rpc import client as rpc_client
from holsrv.rpc import framing

WARMUP_S = 0.3


async def one_client(socket: str, request: bytes, start: float, end: float) -> list[float]:
    reader, writer = await asyncio.open_unix_connection(socket, limit=framing.MAX_FRAME)
    writer.write(framing.encode(rpc_client.hello("bench-load")))
    await framing.read_body(reader)
    latencies = []
    try:
        while (now := time.perf_counter()) < end:
            writer.write(request)
            await framing.read_body(reader)
            if now >= start:
                latencies.append(time.perf_counter() - now)
    finally:
        writer.close()
    return latencies


async def run(socket: str, request: bytes, connections: int, seconds: float) -> dict:
    start = time.perf_counter() + WARMUP_S
    end = start + seconds
    results = await asyncio.gather(*(one_client(socket, request, start, end) for _ in range(connections)))
    per_client = []
    for latencies in results:
        latencies.sort()
        count = len(latencies)
        per_client.append({
            "count": count,
            "median_s": latencies[count // 2] if count else None,
            "p99_s": latencies[min(count - 1, int(0.99 * count))] if count else None,
        })
    everything = sorted(x for latencies in results for x in latencies)
    return {
        "per_second": len(everything) / seconds,
        "median_s": everything[len(everything) // 2] if everything else None,
        "clients": per_client,
    }


def main() -> None:
    socket, request_file, connections, seconds = sys.argv[1:5]
    with open(request_file, "rb") as f:
        request = f.read()
    print(json.dumps(uvloop.run(run(socket, request, int(connections), float(seconds)))))


if __name__ == "__main__":
    main()
