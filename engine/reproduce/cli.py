"""`python -m engine reproduce --prompt TEXT --max-new-tokens N --batch-sizes 1,2,4,8 [--fill same|padded]
[--prefill whole|chunked:C|stepwise] [--dtype float32|bfloat16] [--invariant] [--verify K] [--json FILE]`.

Prints one line per run (status against the alone run, first divergence, largest change, closest margin, fragile
steps, the logits' SHA-256), the closest call, and the text of every run that parted. Every flag is checked
before PyTorch is imported; a bad one is named in one line.
"""
from __future__ import annotations

import json
import math
import sys

from engine.cli.files import MAX_PROMPT_FILE, check_argument_text, read_text_file
from ..errors import ConfigError, DecodeScopeError
from engine.cli.output import check_target, say_error, write_file, write_stdout
from .settings import (DTYPES, FILLS, MAX_BATCH, MAX_BATCH_SIZES, MAX_NEW_TOKENS, MAX_VERIFY, StudySettings,
                       parse_batch_sizes)

STATUS_WORDS = {"identical": "identical", "bits": "bits differ", "tokens": "tokens differ"}


def add_reproduce_parser(sub, formatter) -> None:
    p = sub.add_parser("reproduce", formatter_class=formatter,
                       help="decode a prompt alone and inside batches: where the logits' bits move and where a "
                            "temperature-0 answer could flip",
                       description="Decode a prompt greedily alone, alone again, and inside a batch of each size "
                                   "(the other rows are other texts), and compare every step's logits with the "
                                   "alone run: the largest change, the top-2 margin, 'fragile' where the margin is "
                                   "at most twice the change (only there can the argmax flip), the first step "
                                   "whose token differs, and a SHA-256 of each run's logits.")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="text for the model to continue")
    source.add_argument("--prompt-file", metavar="PATH", help="read the prompt from a UTF-8 file ('-' for stdin)")
    p.add_argument("--model", default=None,
                   help="smollm2-135m (bundled; the default), gemma3-270m (bundled), or a Hugging Face id or "
                        "local folder")
    p.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    p.add_argument("--max-new-tokens", type=int, default=32, metavar="N",
                   help=f"tokens each run decodes (1..{MAX_NEW_TOKENS}); a run also ends at the end-of-text token")
    p.add_argument("--batch-sizes", default="1,2,4,8", metavar="LIST",
                   help=f"batch sizes, comma-separated (each 1..{MAX_BATCH}, at most {MAX_BATCH_SIZES}); 1 with "
                        "the default prefill is the alone run again")
    p.add_argument("--fill", default="same", choices=FILLS,
                   help="the other rows: as long as the prompt (no padding), or longer and shorter, left-padded")
    p.add_argument("--prefill", default="whole", metavar="MODE",
                   help="how the batched runs read the prompt: whole (one pass), stepwise (a token a pass) or "
                        "chunked:C (C tokens a pass); the alone reference always reads it whole")
    p.add_argument("--dtype", default="float32", choices=DTYPES,
                   help="the precision of every run (a bfloat16 copy of the model is made when it loads in float32)")
    p.add_argument("--invariant", action="store_true",
                   help="batch-invariant mode: every linear layer computed one row at a time (slower)")
    p.add_argument("--verify", type=int, default=0, metavar="K",
                   help=f"also decode alone in K-token verify passes whose drafts are the alone run's own tokens "
                        f"(1..{MAX_VERIFY}; 0: off), as greedy speculative decoding checks them")
    p.add_argument("--temperature", type=float, default=0.0, metavar="T",
                   help="0: greedy; above 0: seeded sampling (the same draws in every run, by the Gumbel-max trick)")
    p.add_argument("--seed", type=int, default=0, help="the seed of the sampling draws (with --temperature)")
    p.add_argument("--json", metavar="FILE", help="write the runs as JSON ('-' for stdout)")


def settings_from(args) -> StudySettings:
    """The study's settings from the flags; a ConfigError naming the flag."""
    if args.verify != 0 and not 1 <= args.verify <= MAX_VERIFY:
        raise ConfigError("verify", f"--verify: must be between 1 and {MAX_VERIFY} (or 0 for off), got {args.verify}")
    if not math.isfinite(args.temperature) or args.temperature < 0:
        raise ConfigError("temperature", f"--temperature: must be 0 or more, got {args.temperature:g}")
    try:
        sizes = parse_batch_sizes(args.batch_sizes)
        return StudySettings(max_new_tokens=args.max_new_tokens, batch_sizes=sizes, fill=args.fill,
                             prefill=args.prefill, dtype=args.dtype, invariant=args.invariant, verify=args.verify,
                             temperature=args.temperature, seed=args.seed, chat=args.chat).validate()
    except ConfigError as exc:           # the same sentence, naming the flag as typed
        said = str(exc).split(": ", 1)[-1]
        raise ConfigError(exc.param, f"--{exc.param.replace('_', '-')}: {said}") from None


def _prompt(args) -> str:
    if args.prompt_file is not None:
        args.prompt = read_text_file(args.prompt_file, flag="--prompt-file", field="prompt_file",
                                     limit=MAX_PROMPT_FILE, too_big=f"over {MAX_PROMPT_FILE // 2**20} MiB")
    check_argument_text(args.prompt, flag="--prompt", field="prompt",
                        hint="check the terminal's encoding, or use --prompt-file")
    if not args.prompt.strip():
        raise ConfigError("prompt", "--prompt: is empty; type some text for the model to continue")
    return args.prompt


def reproduce_main(args) -> int:
    try:
        settings = settings_from(args)
        check_target(args.json, "--json")
        prompt = _prompt(args)
        from ..model import load_model
        from .study import run_study

        lm = load_model(args.model, device="auto", dtype="float32")
        study = run_study(lm, prompt, settings, what_if=False,
                          progress=lambda done, total, label: print(f"[{done + 1}/{total}] {label}",
                                                                    file=sys.stderr))
        report = json.dumps(study.to_dict(), ensure_ascii=False)
        if args.json == "-":
            write_stdout(report + "\n")
            return 0
        write_stdout(format_study(study) + "\n")
        if args.json:
            write_file(args.json, report)
            print(f"runs written to {args.json}", file=sys.stderr)
    except DecodeScopeError as exc:
        return say_error(exc)
    except KeyboardInterrupt:
        return 130
    return 0


def _number(value) -> str:
    return "-" if value is None else "0" if value == 0 else f"{value:.3g}"


def format_study(study) -> str:
    """One line per run, the closest call, and the text of each run that parted from the alone run. Steps are
    numbered from 1 here, as everywhere people read them (the JSON's first_divergence is an index from 0)."""
    s = study.settings
    lines = [f"model {study.model}, {len(study.prompt_ids)} prompt tokens, {s.dtype}, fill {s.fill}, "
             f"prefill {s.prefill}, {'batch-invariant mode' if s.invariant else 'normal mode'}, "
             + ("greedy" if s.temperature == 0 else f"sampled at temperature {s.temperature:g}, seed {s.seed}"),
             f"{'run':<24} {'batch':>5}  {'against the alone run':<22} {'first div':>9}  {'max |Δ|':>9}  "
             f"{'min margin':>10}  {'fragile':>7}  {'logits sha256':<16} {'seconds':>7}"]
    for i, (run, cmp) in enumerate(zip(study.runs, study.comparisons)):
        status = "(the reference)" if i == 0 else STATUS_WORDS[cmp.status]
        first = "-" if cmp.first_divergence is None else f"step {cmp.first_divergence + 1}"
        margin = min((c.margin for c in cmp.steps), default=None)
        lines.append(f"{run.label:<24} {run.spec.batch_size:>5}  {status:<22} {first:>9}  {_number(cmp.max_delta):>9}"
                     f"  {_number(margin):>10}  {len(cmp.fragile_steps):>7}  {cmp.logits_sha256[:16]:<16} "
                     f"{run.seconds:>7.2f}")
    closest = study.closest
    if closest is not None and closest.delta > 0:
        who = study.runs[closest.run].label
        verdict = ("fragile: a flip was possible here" if closest.ratio <= 1
                   else f"margin / (2 max |Δ|) = {closest.ratio:.3g}: no flip was possible")
        lines.append(f"\nclosest call: step {closest.step + 1} ({who}): margin {closest.margin:.4g} against "
                     f"max |Δ| {closest.delta:.3g}; {verdict}")
    elif closest is not None:
        lines.append(f"\nno run changed a single bit of the logits; the smallest margin was {closest.margin:.4g} "
                     f"at step {closest.step + 1}")
    flips = [i for i, c in enumerate(study.comparisons) if c.status == "tokens"]
    lines.append(f"{len(flips)} of {len(study.runs) - 1} runs chose another token somewhere" if flips
                 else "every run chose the same tokens as the alone run")
    lines.append(f"\nalone: {study.texts[0]!r}")
    for i in flips:
        lines.append(f"{study.runs[i].label} (from step {study.comparisons[i].first_divergence + 1}): "
                     f"{study.texts[i]!r}")
    return "\n".join(lines)
