"""Explorer UI benchmarks: the time from a click on Next to the new chart, and the beam-tree figure build.

    .venv/bin/python -m bench.bench_ui [--steps 30] [--real-tree]

1. Next -> new chart, server side: the Step-by-step page run in AppTest (the whole script
   rerun: one forward pass, the figures, the text view), median over `--steps` clicks;
   and its parts measured alone: Decoder.step(), building the candidates figure, and
   serialising it to JSON as Streamlit does.
2. Beam tree at 8 beams x 64 steps (1 + 64 * 16 nodes): a tree of that exact shape
   (built here, or recorded from the bundled model with --real-tree), figure build and
   JSON serialisation, median over 10 builds, folded (the default past 600 nodes) and unfolded.
"""
from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from engine import DecodeConfig, Node, Sequence, Step, Trace, load_model  # noqa: E402
from engine.decoding.beam import BeamSearch  # noqa: E402
from engine.decoding.decoder import Decoder  # noqa: E402
from figures.beam_tree import beam_tree_figure  # noqa: E402
from figures.candidates import candidates_figure  # noqa: E402

PROMPT = "Once upon a time, in a small village by the sea,"


def median_ms(samples: list) -> str:
    return (f"{statistics.median(samples) * 1000:8.1f} ms  "
            f"(min {min(samples) * 1000:.1f}, max {max(samples) * 1000:.1f})")


def bench_next(steps: int) -> None:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.query_params.update({"max_new_tokens": str(steps + 40), "prompt": PROMPT, "strategy": "greedy"})
    at.run()
    at.switch_page("pages/step_by_step.py")
    at.run()
    clicks = []
    for _ in range(steps):
        if at.button(key="sbs_next").disabled:      # the decode ended (EOS)
            break
        t0 = time.perf_counter()
        at.button(key="sbs_next").click().run()
        clicks.append(time.perf_counter() - t0)
        assert not at.exception, at.exception
    print(f"Next -> new chart (AppTest, whole page rerun), median of {len(clicks)}: {median_ms(clicks)}")

    lm = load_model()
    decoder = Decoder(lm, PROMPT, DecodeConfig(max_new_tokens=steps + 1))
    decoder.step()                                  # the prefill is not a Next
    forward, figure, serialise = [], [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        step = decoder.step()
        if step is None:
            break
        t1 = time.perf_counter()
        fig = candidates_figure(step, decoder.config)
        t2 = time.perf_counter()
        fig.to_plotly_json()
        t3 = time.perf_counter()
        forward.append(t1 - t0)
        figure.append(t2 - t1)
        serialise.append(t3 - t2)
    print(f"  of which Decoder.step() (one forward pass):       {median_ms(forward)}")
    print(f"  of which candidates figure build:                 {median_ms(figure)}")
    print(f"  of which figure -> JSON:                          {median_ms(serialise)}")


def synthetic_tree(beams: int = 8, steps: int = 64, seed: int = 0) -> Trace:
    """A beam tree of the recorded shape: 2*beams continuations per step, the best `beams` kept."""
    rng = random.Random(seed)
    nodes = [Node(id=0, parent=None, step=-1, token_id=-1, text="", logprob=0.0, cum_logprob=0.0, score=0.0,
                  length=0, status="root", beam=0, rank=0)]
    running = [(0, 0.0)]
    trace_steps = []
    for t in range(steps):
        options = []
        for slot, (parent, cum) in enumerate(running):
            for _ in range(2 * beams):
                lp = -rng.expovariate(1.0)
                options.append((cum + lp, lp, parent, slot))
        options.sort(key=lambda o: -o[0])
        options = options[:2 * beams]
        new_running = []
        for rank, (cum, lp, parent, slot) in enumerate(options, start=1):
            last = t == steps - 1
            status = "finished" if last and rank <= beams else ("kept" if rank <= beams and not last else "pruned")
            node = Node(id=len(nodes), parent=parent, step=t, token_id=rng.randrange(1000),
                        text=rng.choice([" the", " of", "<b>", "\n", " Paris", "&amp;", " $x$"]), logprob=lp,
                        cum_logprob=cum, score=cum / (t + 1), length=t + 1, status=status, beam=slot, rank=rank)
            nodes.append(node)
            if status == "kept":
                new_running.append((node.id, cum))
        running = new_running or running
        trace_steps.append(Step(index=t, candidates=[], entropy=1.0, shaped_entropy=1.0, removed_mass=0.0,
                                kept_count=0, chosen_ids=[0] * beams, chosen_texts=[""] * beams,
                                beam_node_ids=[n for n, _ in running]))
    best = max((n for n in nodes if n.status == "finished"), key=lambda n: n.score)
    config = DecodeConfig(strategy="beam", num_beams=beams, max_new_tokens=steps)
    return Trace(model="synthetic", prompt=PROMPT, prompt_token_ids=[1], config=config, steps=trace_steps,
                 sequences=[Sequence(token_ids=[], text="", cum_logprob=best.cum_logprob, score=best.score,
                                     node_id=best.id)], nodes=nodes)


def bench_tree(real: bool) -> None:
    if real:
        lm = load_model()
        trace = BeamSearch(lm, "Once upon a time", DecodeConfig(strategy="beam", num_beams=8, max_new_tokens=64)).run()
        source = f"recorded from the bundled model ({len(trace.steps)} steps)"
    else:
        trace = synthetic_tree()
        source = "synthetic, same shape as a recorded search"
    print(f"Beam tree, 8 beams x {len(trace.steps)} steps, {len(trace.nodes)} nodes ({source}):")
    beam_tree_figure(trace)                         # warm up plotly's validators
    for label, collapse in (("folded (default)", 600), ("unfolded", 10**9)):
        build, serialise = [], []
        for _ in range(10):
            t0 = time.perf_counter()
            fig = beam_tree_figure(trace, collapse_above=collapse)
            t1 = time.perf_counter()
            fig.to_plotly_json()
            build.append(t1 - t0)
            serialise.append(time.perf_counter() - t1)
        print(f"  {label:17s} build {median_ms(build)}; to JSON {median_ms(serialise)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--real-tree", action="store_true", help="record the 8 x 64 tree from the bundled model")
    parser.add_argument("--only", choices=("next", "tree"))
    args = parser.parse_args()
    if args.only != "next":
        bench_tree(args.real_tree)
    if args.only != "tree":
        bench_next(args.steps)


if __name__ == "__main__":
    main()
