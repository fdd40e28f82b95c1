"""Command line: `python -m engine decode --prompt TEXT --strategy beam ...`.

Prints a table (step, chosen token, its probability, the top 5 alternatives) and
optionally writes the trace as JSON. Bad input exits with status 2 and one line
`error: ...` naming the parameter; no traceback.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys

from .config import STRATEGIES, DecodeConfig
from .errors import ConfigError, DecodeScopeError


class _Parser(argparse.ArgumentParser):
    def error(self, message):   # one line, status 2, like every other bad input
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    d = DecodeConfig()
    parser = _Parser(prog="python -m engine", description="Decode with a causal LM and record every step.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("decode", help="decode a prompt and print every step")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="text for the model to continue")
    source.add_argument("--prompt-file", metavar="PATH", help="read the prompt from a UTF-8 file ('-' for stdin)")
    p.add_argument("--model", default=None, help="Hugging Face id or local folder (default: the bundled SmolLM2)")
    p.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    p.add_argument("--strategy", default=d.strategy, help=f"one of {', '.join(STRATEGIES)}")
    p.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens)
    p.add_argument("--temperature", type=float, default=d.temperature)
    p.add_argument("--top-k", type=int, default=d.top_k)
    p.add_argument("--top-p", type=float, default=d.top_p)
    p.add_argument("--min-p", type=float, default=d.min_p)
    p.add_argument("--repetition-penalty", type=float, default=d.repetition_penalty)
    p.add_argument("--num-beams", type=int, default=d.num_beams)
    p.add_argument("--length-penalty", type=float, default=d.length_penalty)
    p.add_argument("--early-stopping", action="store_true")
    p.add_argument("--num-return-sequences", type=int, default=d.num_return_sequences)
    p.add_argument("--tau", type=float, default=d.tau)
    p.add_argument("--hard", action="store_true")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--top-n", type=int, default=d.top_n)
    p.add_argument("--json", metavar="PATH", help="write the trace as JSON ('-' for stdout)")
    p.add_argument("--explain", action="store_true",
                   help="under the table, list what happened: unlikely picks, the first loop, entropy events, "
                        "where the run leaves the greedy path (also stored in the --json trace)")
    return parser


def config_from_args(args) -> DecodeConfig:
    names = {f.name for f in dataclasses.fields(DecodeConfig)}
    values = {k: v for k, v in vars(args).items() if k in names}
    return DecodeConfig(**values)


def format_table(trace) -> str:
    """One line per step: step (numbered from 1, as on every page), chosen token, its raw probability,
    the top 5 alternatives. Step.index stays 0-based in the trace; only the printed number is 1-based."""
    from .trace import Trace  # noqa: F401  (documentation of the input type)

    lines = [f"{'step':>4}  {'chosen':<18} {'prob':>7}  top 5"]
    for step in trace.steps:
        chosen = step.chosen_ids[0]
        prob = next((c.prob for c in step.candidates if c.token_id == chosen), float("nan"))
        top = "  ".join(f"{_show(c.text)} {c.prob:.3f}" for c in step.candidates[:5])
        extra = f" (+{len(step.chosen_ids) - 1} beams)" if len(step.chosen_ids) > 1 else ""
        lines.append(f"{step.index + 1:>4}  {_show(step.chosen_texts[0]):<18} {prob:>7.4f}  {top}{extra}")
    lines.append("")
    for i, seq in enumerate(trace.sequences):
        lines.append(f"[{i}] cum_logprob {seq.cum_logprob:.4f}  score {seq.score:.4f}  {seq.text!r}")
    return "\n".join(lines)


def _show(text: str) -> str:
    return repr(text)[1:-1] if text.strip() == text and text else repr(text)


MAX_PROMPT_FILE = 10 * 1024 * 1024   # no model's context holds more; a bigger file is a wrong file


def read_prompt_file(path: str) -> str:
    """The prompt from a file (or stdin); a missing, unreadable, huge or non-UTF-8 file is named in the error."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_PROMPT_FILE + 1)
        else:
            with open(path, "rb") as fh:
                data = fh.read(MAX_PROMPT_FILE + 1)
    except OSError as exc:
        raise ConfigError("prompt_file", f"--prompt-file: cannot read {path}: {exc.strerror}") from None
    if len(data) > MAX_PROMPT_FILE:
        raise ConfigError("prompt_file", f"--prompt-file: {path} is over {MAX_PROMPT_FILE // 2**20} MB; "
                                         "no model's context holds that much text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError("prompt_file", f"--prompt-file: {path} is not UTF-8 text "
                                         f"(byte {exc.start} cannot be decoded)") from None


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = config_from_args(args)
        config.validate()
        from .decode import decode
        from .model import load_model

        if args.prompt_file is not None:
            args.prompt = read_prompt_file(args.prompt_file)
        if not args.prompt.strip():
            raise ConfigError("prompt", "prompt: is empty; type some text for the model to continue")

        def progress(fraction, message, _shown=[-1.0]):
            # only the slow first load (de-quantising, caching) is worth lines on the terminal
            if fraction < 1.0 and ("first run" in message or "cache" in message) and fraction - _shown[0] >= 0.1:
                print(f"[{fraction:4.0%}] {message}", file=sys.stderr)
                _shown[0] = fraction

        lm = load_model(args.model, progress=progress)
        trace = decode(lm, args.prompt, config)
        if args.explain:
            from .explain import with_findings

            trace = with_findings(trace)
    except DecodeScopeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    if args.json == "-":
        sys.stdout.write(trace.to_json() + "\n")
        return 0
    print(format_table(trace))
    if args.explain:
        from .explain import format_findings

        print()
        print(format_findings(trace))
    if args.json:
        try:
            with open(args.json, "w", encoding="utf-8") as fh:
                fh.write(trace.to_json())
        except OSError as exc:
            print(f"error: --json: cannot write {args.json}: {exc.strerror}", file=sys.stderr)
            return 2
        print(f"trace written to {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
