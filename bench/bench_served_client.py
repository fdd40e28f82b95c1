"""The served-model client's own cost per request: Server's requests (httpx2, a new connection each time,
the watchdog that enforces the whole-request deadline, the header and size checks) against a bare
standard-library request for the same answer, both to one stand-in server on loopback in this process.

    .venv/bin/python -m bench.bench_served_client [--rounds 200]

A beam search makes one request per beam per step, so this per-request overhead is what the deadline costs.
Medians over --rounds, interleaved; the machine's load beside each figure. A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import urllib.request

from engine.served import Server
from tests.hostile_servers import RawServer, well_formed


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def say(figure: str) -> None:
    print(f"{figure:<78} [{load()}]", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    stand_in = RawServer(well_formed)
    try:
        server = Server.connect(stand_in.url)
        payload = {"model": server.model, "prompt": "Hi", "max_tokens": 1, "logprobs": 1}

        def ours():
            server._call("POST", "/v1/completions", payload)

        def reference():
            request = urllib.request.Request(stand_in.url + "/v1/completions", data=json.dumps(payload).encode(),
                                             headers={"Content-Type": "application/json"}, method="POST")
            with urllib.request.urlopen(request, timeout=60) as response:
                json.loads(response.read())

        for warm in (ours, reference):
            warm()
        a, b = [], []
        for _ in range(args.rounds):
            for run, into in ((ours, a), (reference, b)):
                t0 = time.perf_counter()
                run()
                into.append(time.perf_counter() - t0)
        ours_s, ref_s = statistics.median(a), statistics.median(b)
        say(f"one completion request: client {ours_s * 1e3:.2f} ms, urllib {ref_s * 1e3:.2f} ms")
        say(f"ratio client / urllib: {ours_s / ref_s:.2f}x over {args.rounds} rounds")
    finally:
        stand_in.close()


if __name__ == "__main__":
    main()
