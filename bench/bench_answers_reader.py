"""The saved-run reader's time and memory on the largest files a run writes and on files padded to be slow.

    .venv/bin/python -m bench.bench_answers_reader [--out DIR] [--only NAME]

On the tiny random Llama (no download) it grows a consistent tree of 5,000 answers (depth 16, budget 5,000,
branch 2), then writes:
  - "whole": that run as the app writes it, greedy and 6 beam widths placed, 256 samples;
  - "150,000 landings": the same run with 150,000 copies of its greedy landing (each ranked against every
    answer by a reader that does not bound them);
  - "235,000 outcomes": the same with 235,000 sample outcomes of count 0 beside the real ones;
  - "maxima" (with --maxima): a run at the CLI's maxima, depth 64, budget 5,000, branch 64 (320,001 nodes).
The first three hold every node as a whole row of 11 values, which every version of the reader takes, so
the same files time an older reader too (--only NAME with PYTHONPATH=<its checkout>). Each file is read in a
fresh process: size, seconds to read (or to refuse, with what was said) and the CPU seconds among them (on a
busy machine the wall time is mostly waiting), the peak of the memory Python allocated while reading
(tracemalloc, on a second read), and the load average.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]


def full_rows(data: dict) -> dict:
    """Every node as a whole row of 11 values (the form an older reader requires)."""
    data["nodes"] = [row if len(row) == 11 else [*row, False, 0.0, 0.0, 0.0, 0.0, None, None]
                     for row in data["nodes"]]
    return data


def build(out: Path, maxima: bool) -> dict:
    from engine.answers import TreeSettings
    from engine.answers.record import to_dict
    from engine.answers.run import explore
    from tiny_models import tiny_llama

    lm = tiny_llama()
    files = {}
    run = explore(lm, "The capital of", TreeSettings(depth=16, budget=5000, branch=2, batch=64),
                  beams=(1, 2, 4, 8, 16, 32, 3), samples=256, seed=1)
    whole = full_rows(to_dict(run))
    files["whole"] = whole
    shortest = min(run.tree.answers, key=lambda a: len(a.token_ids))
    landing = ["greedy", list(shortest.token_ids), shortest.text, True, shortest.logprob]
    files["150,000 landings"] = dict(whole, landings=[landing] * 150_000)
    outcomes = json.loads(json.dumps(whole))
    outcome = [list(shortest.token_ids), shortest.text, True, shortest.logprob, 0]
    outcomes["samples"]["outcomes"] += [outcome] * 235_000
    files["235,000 outcomes"] = outcomes
    if maxima:
        big = explore(lm, "The capital of", TreeSettings(depth=64, budget=5000, branch=64, batch=64),
                      beams=(1, 2, 4, 8, 16, 32), samples=256, seed=5)
        files["maxima"] = to_dict(big)           # as the app writes it (the form this reader writes)
    paths = {}
    for name, data in files.items():
        path = out / (name.replace(",", "").replace(" ", "-") + ".json")
        path.write_text(json.dumps(data, ensure_ascii=False, allow_nan=False), encoding="utf-8")
        paths[name] = path
    return paths


def measure(path: Path) -> str:
    """Read one file: the seconds of a first read, the memory Python allocated at its peak in a second."""
    from engine.answers.record import from_json
    from engine.errors import TraceFormatError

    def read() -> str:
        try:
            run = from_json(data)
            return f"read: {len(run.tree.answers):,} answers, {len(run.landings)} landings"
        except TraceFormatError as exc:
            return f"refused: {str(exc)[:110]}"

    data = path.read_bytes()
    t0, c0 = time.perf_counter(), time.process_time()
    said = read()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    tracemalloc.start()            # a second read for the memory (tracing slows Python down several times)
    read()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return f"{len(data) / 1e6:6.1f} MB  {seconds:7.2f} s ({cpu:.2f} s CPU)  peak +{peak / 2**20:5.0f} MiB  {said}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="/tmp/answers-reader-bench")
    parser.add_argument("--only", default=None, help="read this file of --out only (built before, e.g. with "
                                                      "--build-only); run it with an older checkout first on "
                                                      "PYTHONPATH to time that reader")
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--maxima", action="store_true", help="also the CLI's maxima (about a minute to grow)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.only:
        print(measure(out / args.only), flush=True)
        return
    paths = build(out, args.maxima)
    if args.build_only:
        print("\n".join(str(p) for p in paths.values()))
        return
    for name, path in paths.items():
        line = subprocess.run([sys.executable, "-m", "bench.bench_answers_reader", "--out", str(out), "--only",
                               path.name], capture_output=True, text=True, cwd=ROOT).stdout.strip()
        print(f"{name:<18} {line}   (load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
