"""What an uploaded trace costs the server on every rerun (each click reruns the page), heavy vs small.

    .venv/bin/python -m bench.bench_upload [--reruns 5]

A small file (a real 6-step decode) and a heavy but valid one (the same decode with findings and versions
filled up to the reader's bounds: about 100,000 values, close to 2 MB) are uploaded on Step by step in
AppTest, on the tiny random Llama the tests use. Reported: the first run after the upload (read and checked
once), the median rerun after it, and the growth of resident memory over the reruns, with the ratio heavy ÷
small beside the machine's load. The reruns of the heavy file should cost what the small file's cost.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def files() -> dict:
    from tiny_models import tiny_llama

    from engine import DecodeConfig, decode
    from engine.trace.reader import MAX_FREE_ITEMS

    lm = tiny_llama()
    folder = tempfile.mkdtemp()
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    small = decode(lm, "The capital of France is", DecodeConfig(strategy="greedy", max_new_tokens=6))
    data = small.to_dict()
    data["findings"] = {"x": [i * 0.5 for i in range(MAX_FREE_ITEMS - 100)]}
    data["versions"] = {f"v{i}": "x" * 200 for i in range(90)}
    return {"folder": folder, "small": small.to_json().encode(), "heavy": json.dumps(data).encode()}


def measure(folder: str, payload: bytes, reruns: int) -> dict:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.session_state["model"] = folder
    at.session_state["prompt"] = "The capital of France is"
    at.session_state["max_new_tokens"] = 4
    at.switch_page("pages/step_by_step.py").run()
    start = time.perf_counter()
    at.file_uploader(key="sbs_upload").set_value(("t.json", payload, "application/json")).run()
    first = time.perf_counter() - start
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    before = rss_mb()
    times = []
    for _ in range(reruns):
        start = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - start)
    return {"first": first, "rerun": statistics.median(times), "grew": rss_mb() - before}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reruns", type=int, default=5)
    args = parser.parse_args()
    made = files()
    print(f"small file {len(made['small']) / 1e3:,.0f} kB, heavy file {len(made['heavy']) / 1e6:,.1f} MB")
    small = measure(made["folder"], made["small"], args.reruns)
    heavy = measure(made["folder"], made["heavy"], args.reruns)
    for name, unit, scale in (("first", "s", 1), ("rerun", "s", 1), ("grew", "MB", 1)):
        what = {"first": "run after the upload", "rerun": "rerun (median)", "grew": "memory growth over reruns"}
        print(f"{what[name]:<28} small {small[name] * scale:8.3f} {unit}   heavy {heavy[name] * scale:8.3f} {unit}"
              f"   heavy/small {heavy[name] / small[name] if small[name] > 0 else float('nan'):6.2f}   {load()}")


if __name__ == "__main__":
    main()
