"""The memory and the time a link or a flag can ask of a shared server: each worst case within the limits, run the
way its page or command runs it, in a fresh interpreter of its own, on the bundled SmolLM2 (Gemma 3 with --gemma).

    .venv/bin/python bench/hostile_run.py --memory [--gemma] [CASE ...]

For each case it prints the seconds until something is on screen (the first progress report: a page draws its
bar and Stop there, the command line its first line), the seconds to a decode's first step where the case has
steps (its first chart), the seconds to the end, and the peak resident memory over
what the process held once the model was loaded and had run one short pass, each beside the machine's 1-minute
load average when the case began and ended. Then the worst of each family. The goal: no case over +1.5 GB, and
none over 60 s before something is on screen. Nothing is asserted here: tests/engine/test_answers_memory.py,
tests/engine/test_dry_scan_bounded.py, tests/ui/test_replay_link.py and tests/ui/test_prompt_progress.py assert
the behaviour."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:                   # each case imports the engine in its own interpreter
    from engine.model import LoadedModel

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

GOAL_MIB, GOAL_FIRST_S = 1536, 60.0
TEXT = ("A language model reads the prompt once and then predicts one token at a time; each prediction is a "
        "distribution over the whole vocabulary, and a decoding strategy turns it into a choice. ")


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class Watch:
    """Peak resident memory sampled every 20 ms in a thread, and the time of the first report."""

    def __init__(self):
        self.start_mib = self.peak_mib = rss_mib()
        self.first_s = self.step_s = None
        self.load_before = os.getloadavg()[0]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak_mib = max(self.peak_mib, rss_mib())
            self._stop.wait(0.02)

    def __enter__(self):
        self.t0 = time.perf_counter()
        self._thread.start()
        return self

    def shown(self, *args, **kwargs) -> None:
        """A progress report: the first one is when something is on screen."""
        if self.first_s is None:
            self.first_s = time.perf_counter() - self.t0

    def stepped(self, *args, **kwargs) -> None:
        """A decode's step: the first one is when its first chart or token is there."""
        self.shown()
        if self.step_s is None:
            self.step_s = time.perf_counter() - self.t0

    def __exit__(self, *exc):
        self.total_s = time.perf_counter() - self.t0
        self._stop.set()
        self._thread.join()
        self.peak_mib = max(self.peak_mib, rss_mib())
        self.load_after = os.getloadavg()[0]


def prompt_of(lm: LoadedModel, tokens: int) -> str:
    """A text of about `tokens` tokens for this model."""
    ids = lm.tokenizer(TEXT * (tokens // 30 + 2), add_special_tokens=False)["input_ids"][:tokens]
    return lm.tokenizer.decode(ids)


def answers(prompt_tokens: int = 0, text: str | None = None, chat: bool = False, depth: int = 8, budget: int = 200,
            branch: int = 8, batch: int = 16, samples: int = 0, beams=(1, 4)):
    def run(lm: LoadedModel, watch):
        from engine.answers import TreeSettings
        from engine.answers.run import explore

        prompt = text if text is not None else prompt_of(lm, prompt_tokens) if prompt_tokens else \
            "The capital of France is"
        settings = TreeSettings(depth=depth, budget=budget, branch=branch, batch=batch)
        explore(lm, prompt, settings, chat=chat, beams=beams, samples=samples, seed=0, progress=watch.shown)
    return run


def dry_at_its_limits(lm: LoadedModel, watch):
    """Step-by-step opened by a link with DRY on and 64 sequence breakers of 40 characters, each beginning
    with letters many tokens end with: the page's first step."""
    from engine import DecodeConfig
    from engine.decoding.stepper import Stepper

    breakers = [c + "a" * 39 for c in "etaoinsrhl"] + ["a" * k + "e" + "a" * (39 - k) for k in range(1, 39)] + \
        ["e" * k + "a" * (40 - k) for k in range(2, 18)]
    config = DecodeConfig(strategy="sample", sampler_order="llama.cpp", dry_multiplier=0.8,
                          dry_sequence_breakers=json.dumps(breakers[:64]), max_new_tokens=8).validate()
    Stepper(lm, "The capital of France is", config)
    watch.shown()


def step_link(steps: int):
    def run(lm: LoadedModel, watch):
        """Step-by-step opened by a link on step `steps` with as many new tokens (no end token: every step runs):
        the page's replay, its bar drawn after the first step decoded."""
        from engine import DecodeConfig
        from engine.decoding.stepper import Stepper

        lm.eos_token_ids = ()
        stepper = Stepper(lm, "Count from 1 to 5000: 1, 2, 3, 4, 5,", DecodeConfig(max_new_tokens=steps))
        watch.shown()
        while len(stepper.steps()) < steps and not stepper.finished():
            stepper.go(len(stepper.steps()))
    return run


def step_long_prompt(prompt_tokens: int):
    def run(lm: LoadedModel, watch):
        """Step-by-step opened on a prompt of `prompt_tokens` tokens: the bar counting the prompt's tokens as
        they are read (engine.decoding.prefill.watching_prompts), then its first step (the page draws it)."""
        from engine import DecodeConfig
        from engine.decoding.prefill import watching_prompts
        from engine.decoding.stepper import Stepper

        with watching_prompts(watch.shown):
            Stepper(lm, prompt_of(lm, prompt_tokens), DecodeConfig(max_new_tokens=8))
        watch.stepped()
    return run


def compare_lanes(prompt_tokens: int, new_tokens: int):
    def run(lm: LoadedModel, watch):
        """Compare: six lanes over one long prompt, its progress box counting the prompt's tokens first."""
        from engine import DecodeConfig
        from engine.decoding.lanes import decode_lanes
        from engine.decoding.prefill import watching_prompts

        configs = [DecodeConfig(max_new_tokens=new_tokens)] + [
            DecodeConfig(strategy="sample", seed=s, max_new_tokens=new_tokens) for s in range(5)]
        with watching_prompts(watch.shown):
            decode_lanes(lm, prompt_of(lm, prompt_tokens), configs, on_step=watch.stepped)
    return run


def decode_cli(prompt_tokens: int):
    def run(lm: LoadedModel, watch):
        """The command line's decode of a long --prompt-file, 8 new tokens: a line on stderr per part of the
        prompt read (its first line is on screen), then the steps."""
        from engine import DecodeConfig
        from engine.decoding.prefill import watching_prompts
        from engine.strategies import make_runner

        runner = make_runner(lm, prompt_of(lm, prompt_tokens), DecodeConfig(max_new_tokens=8))
        with watching_prompts(lambda read, total: read and watch.shown()):
            while not runner.finished:
                runner.step()
                watch.stepped()
    return run


PAGE_MAXIMA = dict(depth=16, budget=1000, branch=16, batch=16)
CASES = {   # name: (family, what it is, run)
    "answers-link-maxima": ("Whole answers", "link at every maximum: depth 16, budget 1000, branch 16, 128 samples, "
                            "beams 2,4,8", answers(**PAGE_MAXIMA, samples=128, beams=(1, 2, 4, 8))),
    "answers-link-maxima-no-samples": ("Whole answers", "the same link with no samples",
                                       answers(**PAGE_MAXIMA, beams=(1, 2, 4, 8))),
    "answers-600-tokens-128-samples": ("Whole answers", "a 600-token prompt, 128 samples (the page's other defaults)",
                                       answers(600, samples=128, depth=8, budget=200, branch=6)),
    "answers-cli-300-tokens-256-samples": ("Whole answers", "command line: a 300-token prompt, --samples 256",
                                           answers(300, samples=256)),
    "answers-cli-1000-tokens-256-samples": ("Whole answers", "command line: a 1,000-token prompt, --samples 256",
                                            answers(1000, samples=256)),
    "answers-cli-branch64-batch64-2000-tokens": ("Whole answers", "command line: --branch 64 --batch 64, a "
                                                 "2,000-token prompt", answers(2000, branch=64, batch=64)),
    "answers-cli-8100-tokens": ("Whole answers", "command line: an 8,100-token prompt",
                                answers(8100)),
    "answers-chat-8000-bytes-smallest-budget": ("Whole answers", "a chat prompt of 8,000 bytes, budget 16 (the "
                                                "page's smallest), its other defaults",
                                                answers(text=(TEXT * 60)[:8000], chat=True, budget=16, branch=6,
                                                        samples=32)),
    "dry-breakers-at-their-limits": ("DRY", "64 breakers of 40 characters, by link: the first step",
                                     dry_at_its_limits),
    "step-link-1024": ("Step-by-step", "step=1024&max_new_tokens=1024 (greedy, no end token)", step_link(1024)),
    "step-prompt-2048-tokens": ("Step-by-step", "a prompt of 2,048 tokens (the page's limit): the first step",
                                step_long_prompt(2048)),
    "compare-6-lanes-2048-tokens": ("Compare", "six lanes over a 2,048-token prompt (the page's limit), 32 tokens "
                                    "each", compare_lanes(2048, 32)),
    "decode-cli-8000-tokens": ("Command line", "decode --prompt-file of 8,000 tokens (no page limit), 8 new tokens",
                               decode_cli(8000)),
}


def run_case(name: str, model: str) -> dict:
    """One case in this interpreter: the model loaded and warmed up first, then the case watched."""
    import torch

    from engine.model import load_model

    lm = load_model(model)
    with torch.inference_mode():
        lm.model(input_ids=torch.tensor([[1, 2, 3]]))
    family, what, run = CASES[name]
    error = ""
    with Watch() as watch:
        try:
            run(lm, watch)
        except Exception as exc:         # a refusal is a result too: said in one line
            error = f"{type(exc).__name__}: {str(exc)[:160]}"
    return {"name": name, "family": family, "what": what, "first_s": watch.first_s, "step_s": watch.step_s,
            "total_s": watch.total_s,
            "over_mib": watch.peak_mib - watch.start_mib, "load_before": watch.load_before,
            "load_after": watch.load_after, "error": error}


def main(argv: list) -> int:
    if argv and argv[0] == "--case":
        print("RESULT " + json.dumps(run_case(argv[1], argv[2])), flush=True)
        return 0
    model = "gemma3-270m" if "--gemma" in argv else "smollm2-135m"
    names = [a for a in argv if not a.startswith("--")] or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"unknown case {unknown[0]!r}; the cases: {', '.join(CASES)}", file=sys.stderr)
        return 2
    rows = []
    print(f"{'case':<44} {'on screen':>10} {'1st step':>9} {'to the end':>11} {'peak over start':>16}  "
          "load 1 min (start/end)")
    for name in names:
        done = subprocess.run([sys.executable, __file__, "--case", name, model], capture_output=True, text=True,
                              cwd=ROOT)
        found = [line[7:] for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if not found:
            print(f"{name:<44} failed: {(done.stderr.strip().splitlines() or ['no output'])[-1][:150]}")
            continue
        row = json.loads(found[0])
        rows.append(row)
        first = f"{row['first_s']:.1f} s" if row["first_s"] is not None else "never"
        step = f"{row['step_s']:.1f} s" if row.get("step_s") is not None else "-"
        print(f"{name:<44} {first:>10} {step:>9} {row['total_s']:>9.1f} s {row['over_mib']:>+12.0f} MiB  "
              f"{row['load_before']:.1f} / {row['load_after']:.1f}  {row['error']}", flush=True)
    print()
    print(f"worst per family (goal: at most +{GOAL_MIB:,} MiB and {GOAL_FIRST_S:.0f} s before something is on "
          f"screen; model {model})")
    for family in dict.fromkeys(r["family"] for r in rows):
        mine = [r for r in rows if r["family"] == family]
        memory = max(mine, key=lambda r: r["over_mib"])
        slow = max(mine, key=lambda r: r["first_s"] if r["first_s"] is not None else float("inf"))
        first = f"{slow['first_s']:.1f} s" if slow["first_s"] is not None else "never"
        print(f"  {family:<14} memory +{memory['over_mib']:,.0f} MiB ({memory['name']}, load "
              f"{memory['load_before']:.1f}); on screen after {first} ({slow['name']}, load {slow['load_before']:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
