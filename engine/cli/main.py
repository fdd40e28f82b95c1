"""Command line: `python -m engine decode --prompt TEXT --strategy beam ...`, `python -m engine lens --prompt TEXT`,
`python -m engine answers --prompt TEXT --depth 8 --budget 200`.

`decode` prints a table (step, chosen token, its probability, the top 5 alternatives),
with `--stages` what each sampler stage kept, and optionally writes the trace as JSON.
`lens` prints the top token at every layer for the next token (the logit lens).
`lesson` writes a trace as one HTML file that steps through the run in any browser, offline.
`reproduce` decodes a prompt alone and inside batches and shows where the logits' bits move (engine/reproduce).
Bad input exits with status 2 and one line `error: ...` naming the parameter; no traceback.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import sys
from typing import TYPE_CHECKING

from engine.config import (DEVICES, DTYPES, MAX_BEAMS, MAX_DRAFT_TOKENS, MAX_NEW_TOKENS, MAX_TOP_N,
                           SOFT_INPUT_STRATEGIES, STRATEGIES, DecodeConfig, draft_spec)
from engine.errors import ConfigError, DecodeScopeError
from engine.cli.answers import add_answers_arguments, answers_main
from engine.lesson.cli import add_lesson_parser, lesson_main
from engine.reproduce.cli import add_reproduce_parser, reproduce_main
from engine.cli.grammar import add_grammar_arguments, format_grammar_table, grammar_settings
from engine.cli.samplers import ORDER_WORDS, add_sampler_arguments, flagged, stage_label, state_text
from engine.cli.files import MAX_PROMPT_FILE, check_argument_text, read_text_file
from engine.cli.output import check_target, say_error, write_file, write_stdout
from engine.soft_inputs.cli import add_soft_input_arguments, format_fed, soft_flagged

if TYPE_CHECKING:                   # for annotations only: the trace's module is imported where a decode runs
    from engine.trace import Trace


class _Parser(argparse.ArgumentParser):
    def error(self, message):   # one line, status 2, like every other bad input
        sys.exit(say_error(message))


class _Help(argparse.HelpFormatter):
    """Every option's help ends with its default, when it has one worth naming (not a switch that is off)."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if action.option_strings and "%(default)" not in text and not (default is None or default is False
                                                                         or default == argparse.SUPPRESS):
            text += " (default: %(default)s)"
        return text


def add_prompt_and_model(p: argparse.ArgumentParser) -> None:
    """The arguments every command that reads a prompt shares: the prompt, the model, where it runs, chat."""
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="text for the model to continue")
    source.add_argument("--prompt-file", metavar="PATH", help="read the prompt from a UTF-8 file ('-' for stdin)")
    p.add_argument("--model", default=None,
                   help="smollm2-135m (bundled, English, instruction-tuned; the default), gemma3-270m (bundled, "
                        "multilingual base model), or a Hugging Face id or local folder")
    add_placement(p)
    p.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")


def build_parser(prog: str = "python -m engine") -> argparse.ArgumentParser:
    """The parser, named as the user called it (`decodescope` or `python -m engine`): usage lines and
    errors then show a command they can type again."""
    d = DecodeConfig()
    parser = _Parser(prog=prog, description="Decode with a causal LM and record every step.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("decode", help="decode a prompt and print every step", formatter_class=_Help,
                       description="Decode a prompt and print one line per step (for beam search, the steps of "
                                   "the best hypothesis).")
    add_prompt_and_model(p)
    p.add_argument("--strategy", default=d.strategy, help=f"one of {', '.join(STRATEGIES)}")
    p.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens, metavar="N",
                   help=f"tokens to generate (1..{MAX_NEW_TOKENS}); a run also ends at the end-of-text token")
    p.add_argument("--temperature", type=float, default=d.temperature, metavar="T",
                   help="divides the logits before sampling (sample, soft, gumbel); below 1 sharper, above 1 flatter")
    p.add_argument("--top-k", type=int, default=d.top_k, metavar="K",
                   help="keep only the K most likely tokens (0: off)")
    p.add_argument("--top-p", type=float, default=d.top_p, metavar="P",
                   help="keep the smallest set of most likely tokens holding probability P (1: off)")
    p.add_argument("--min-p", type=float, default=d.min_p, metavar="P",
                   help="drop tokens less likely than P times the top token (0: off)")
    p.add_argument("--repetition-penalty", type=float, default=d.repetition_penalty, metavar="R",
                   help="above 1, tokens already in the text become less likely (1: off); every strategy")
    p.add_argument("--num-beams", type=int, default=d.num_beams, metavar="B",
                   help=f"hypotheses kept at each step (beam; 1..{MAX_BEAMS})")
    p.add_argument("--length-penalty", type=float, default=d.length_penalty, metavar="L",
                   help="beam score = cumulative logprob / length ** L; above 0 favours longer hypotheses")
    p.add_argument("--early-stopping", action="store_true",
                   help="beam: stop as soon as B hypotheses are finished, without checking whether a running "
                        "beam could still beat them")
    p.add_argument("--num-return-sequences", type=int, default=d.num_return_sequences, metavar="N",
                   help="beam: finished hypotheses printed and stored, best first (1..B)")
    p.add_argument("--tau", type=float, default=d.tau,
                   help="gumbel: temperature of the Gumbel-softmax; small values come close to a one-hot")
    p.add_argument("--hard", action="store_true",
                   help="gumbel: feed back the one-hot of the winning token (straight-through) instead of the mixture")
    p.add_argument("--seed", type=int, default=d.seed,
                   help="seeds every random draw: the same seed and settings give the same run")
    p.add_argument("--top-n", type=int, default=d.top_n, metavar="N",
                   help=f"candidates recorded at each step (1..{MAX_TOP_N}); the table prints the first 5")
    p.add_argument("--draft", default=d.draft, metavar="DRAFT",
                   help="speculative: who drafts the tokens: early-exit:L (the model's first L layers), "
                        "prompt-lookup:N (the tokens after an earlier match of the last N tokens) or model:NAME "
                        "(a second model with the same vocabulary)")
    p.add_argument("--draft-tokens", type=int, default=d.draft_tokens, metavar="K",
                   help=f"speculative: tokens drafted per round, the same every round (1..{MAX_DRAFT_TOKENS})")
    p.add_argument("--verify", default=d.verify, metavar="MODE",
                   help="speculative: greedy (keep the drafts the target would pick itself) or sample (keep x "
                        "while u <= p(x)/q(x), with temperature, top-k, top-p and min-p applied to p and q)")
    p.add_argument("--server", metavar="URL", default=None,
                   help="decode on a model served by vLLM or llama.cpp (OpenAI-compatible completions) at URL, "
                        "e.g. http://127.0.0.1:8000; --model then names the server's model (optional when it "
                        "serves one). Each step shows the server's top-N, the rest as 'other'")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds each request to --server may take in all, its whole answer included")
    p.add_argument("--json", metavar="PATH", help="write the trace as JSON ('-' for stdout)")
    p.add_argument("--explain", action="store_true",
                   help="under the table, list what happened: unlikely picks, the first loop, entropy events, "
                        "where the run leaves the greedy path (also stored in the --json trace)")
    p.add_argument("--stages", action="store_true",
                   help="under each step, each sampler stage in the chosen order (--sampler-order): tokens kept, "
                        "its top-1 token's probability, tokens it cut and the mass they held, and the state a "
                        "stateful stage carried (mirostat's mu, XTC's draw, DRY's run, the dynamic temperature)")
    add_sampler_arguments(p)
    add_soft_input_arguments(p)
    add_grammar_arguments(p)
    lens = sub.add_parser("lens", help="the top token at every layer for the next token (logit lens)",
                          formatter_class=_Help)
    add_prompt_and_model(lens)
    lens.add_argument("--top", type=int, default=3, help="candidates shown per layer (1..20)")
    answers = sub.add_parser("answers", help="the most likely whole answers, the mass the tree holds, and where "
                                             "greedy, beam search and samples land", formatter_class=_Help)
    add_prompt_and_model(answers)
    add_answers_arguments(answers)
    add_lesson_parser(sub, _Help)
    add_reproduce_parser(sub, _Help)
    return parser


def add_placement(parser) -> None:
    parser.add_argument("--device", default="auto", help=f"one of {', '.join(DEVICES)} (auto: a GPU when PyTorch "
                                                          "sees one, else the CPU)")
    parser.add_argument("--dtype", default="auto", help=f"one of {', '.join(DTYPES)} (auto: float32 on the CPU, "
                                                        "bfloat16 or float16 on a GPU)")


def config_from_args(args) -> DecodeConfig:
    names = {f.name for f in dataclasses.fields(DecodeConfig)}
    values = {k: v for k, v in vars(args).items() if k in names}
    return DecodeConfig(**values)


def format_table(trace) -> str:
    """One line per step: step (numbered from 1, as on every page), chosen token, its raw probability,
    the top 5 alternatives. Step.index stays 0-based in the trace; only the printed number is 1-based.
    A beam search prints the steps of its best hypothesis (see _beam_rows)."""
    lines = [f"{'step':>4}  {'chosen':<18} {'prob':>7}  top 5"]
    if trace.nodes and trace.sequences and trace.best.node_id is not None:
        lines += _beam_rows(trace)
    else:
        for step in trace.steps:
            prob = step.chosen.prob if step.chosen is not None else float("nan")
            top = "  ".join(f"{_show(c.text)} {c.prob:.3f}" for c in step.candidates[:5])
            lines.append(f"{step.index + 1:>4}  {_show(step.chosen_texts[0]):<18} {prob:>7.4f}  {top}")
    lines.append("")
    for i, seq in enumerate(trace.sequences):
        lines.append(f"[{i}] cum_logprob {seq.cum_logprob:.4f}  score {seq.score:.4f}  {seq.text!r}")
    return "\n".join(lines)


def _beam_rows(trace) -> list:
    """The table's lines for a beam search: each step's token of the best hypothesis [0], the line printed last.

    A step's token of the best running beam is not always a token of the best hypothesis (beams overtake each
    other, and the best hypothesis may end before the search does), so the rows walk the tree from the root to
    the best hypothesis' leaf. The top 5 are that beam's own: the step's recorded distribution when it is this
    beam's, else the continuations of this beam that the search ranked (marked ~, probabilities from the tree)."""
    lines, from_tree = [], False
    children: dict = {}
    for node in trace.nodes:
        children.setdefault(node.parent, []).append(node)
    raw = trace.config.repetition_penalty == 1.0        # the tree holds penalised logprobs otherwise
    for node in trace.path(trace.best.node_id):
        step = trace.steps[node.step] if 0 <= node.step < len(trace.steps) else None
        recorded = _recorded_for(trace, step, node)
        chosen = next((c for c in recorded if c.token_id == node.token_id), None)
        prob = chosen.prob if chosen is not None else (math.exp(node.logprob) if raw else float("nan"))
        if recorded:
            top = "  ".join(f"{_show(c.text)} {c.prob:.3f}" for c in recorded[:5])
        else:
            siblings = sorted(children.get(node.parent, []), key=lambda n: -n.logprob)[:5]
            top = "  ".join(f"{_show(n.text)} {math.exp(n.logprob):.3f}" for n in siblings) + "  ~"
            from_tree = True
        lines.append(f"{node.step + 1:>4}  {_show(node.text):<18} {prob:>7.4f}  {top}")
    searched = len(trace.steps)
    note = f"(beam search: the steps of the best hypothesis [0]; the search ran {searched} steps"
    note += "; ~ its beam's continuations that the search ranked, as recorded in the tree)" if from_tree else ")"
    return lines + [note]


def _recorded_for(trace, step, node) -> list:
    """The step's recorded candidates, by rank, when they are the distribution of `node`'s beam (the beam that
    the best running beam after the step extends); else []."""
    if step is None or not step.beam_node_ids:
        return []
    best = trace.nodes_by_id.get(step.beam_node_ids[0])
    if best is None or best.parent != node.parent:
        return []
    return sorted(step.candidates, key=lambda c: c.rank)


def format_stages_table(trace) -> str:
    """Like format_table, with one line per sampler stage under each step: kept tokens, top-1 and its probability."""
    if trace.model_facts.get("served"):
        return format_table(trace) + ("\n(a served model: its sampler ran on the server, which reports one "
                                      "top-N per step only, so there are no stages to show)")
    if trace.config.strategy == "beam":        # no stages to list: the steps of the best hypothesis, and why
        return format_table(trace) + "\n" + _no_stages_note(trace.config)
    order = ORDER_WORDS.get(trace.config.sampler_order, "transformers'")
    lines = [f"{'step':>4}  {'chosen':<18} {'prob':>7}  stages in {order} order: kept, cut (mass), top-1 p, [state]"]
    # the stage column is as wide as its longest label (the penalties' can name three settings)
    width = max([16] + [len(stage_label(s, trace.config)) + 1 for step in trace.steps for s in step.stages])
    for step in trace.steps:
        prob = step.chosen.prob if step.chosen is not None else float("nan")
        lines.append(f"{step.index + 1:>4}  {_show(step.chosen_texts[0]):<18} {prob:>7.4f}")
        top = step.candidates[0] if step.candidates else None
        vocab = trace.model_facts.get("vocab_size", "?")
        if top is not None:
            lines.append(f"{'':>6}{'raw':<{width}} kept {vocab:>7}  {'':<20}  {_show(top.text)} {top.prob:.4f}")
        for stage in step.stages:
            cut = f"cut {stage.cut_count} ({stage.removed_mass:.4f})" if stage.cut_count else ""
            line = (f"{'':>6}{stage_label(stage, trace.config):<{width}} kept {stage.kept_count:>7}  {cut:<20}  "
                    f"{_show(stage.top_text)} {stage.top_prob:.4f}")
            state = state_text(stage)
            lines.append(line + (f"  [{state}]" if state else ""))
    if not any(step.stages for step in trace.steps):
        lines.append(_no_stages_note(trace.config))
    return "\n".join(lines)


def _no_stages_note(config) -> str:
    """Why a trace has no stages: beam search records none (it applies the repetition penalty to every beam's
    log-probabilities, nothing else); the other strategies record each processor they apply."""
    from engine.samplers.stages import describe

    if config.strategy == "beam":
        applied = (f"it applies the {describe(config)} to every beam's log-probabilities"
                   if config.repetition_penalty != 1.0 else "it applies none of the processors")
        return f"(no sampler stages: beam search records none; {applied}, then ranks the beams by score)"
    return "(no sampler stages: these settings apply none of the processors)"


def format_lens(lens) -> str:
    """One line per layer: the top tokens for the next token; * marks the first layer where the final choice leads.
    A note follows when the last layer's lens is not the model's own logits (the page warns the same)."""
    first = lens.first_top_layer(0)
    lines = [f"next token {_show(lens.chosen_texts[0])}: first the top candidate at layer {first} (*)"
             if first is not None else f"next token {_show(lens.chosen_texts[0])}",
             f"{'layer':>5}  top candidates (probability)"]
    for layer, row in enumerate(lens.cells):
        cell = row[0]
        name = "emb" if layer == 0 else str(layer)
        mark = "*" if layer == first else " "
        tops = "  ".join(f"{_show(t)} {p:.3f}" for t, p in zip(cell.top_texts, cell.top_probs))
        lines.append(f"{name:>5}{mark} {tops}")
    if not lens.matches_model:
        lines.append(f"note: the last layer differs from the model's own logits by up to {lens.max_diff:.3g}: this "
                     "model changes its logits after the final norm (for example by soft-capping), which the lens "
                     "does not copy")
    return "\n".join(lines)


def _show(text: str) -> str:
    return repr(text)[1:-1] if text.strip() == text and text else repr(text)


def read_prompt_file(path: str) -> str:
    """The prompt from a file (or stdin); a missing, unreadable, huge or non-UTF-8 file is named in the error."""
    return read_text_file(path, flag="--prompt-file", field="prompt_file", limit=MAX_PROMPT_FILE,
                          too_big=f"over {MAX_PROMPT_FILE // 2**20} MiB; no model's context holds that much text")


def check_prompt_text(prompt: str) -> None:
    """A prompt from the command line that is not text: a byte that was not UTF-8 (Python keeps it as a
    lone surrogate) or a lone surrogate typed as an escape. Named here, before the model loads."""
    check_argument_text(prompt, flag="--prompt", field="prompt",
                        hint="check the terminal's encoding, or use --prompt-file")


def check_json_target(path: str | None) -> None:
    """Refuse a --json path that cannot be written before the decode, not after it."""
    check_target(path, "--json")


def load_progress():
    """The progress callback for load_model on a terminal: only the slow first load (de-quantising,
    caching) and a damaged cache, with why it is rebuilt, are worth lines there (on stderr)."""
    shown = [-1.0]

    def progress(fraction, message):
        slow = fraction < 1.0 and message != "reading the cached model" and (
            "first run" in message or "cache" in message or "de-quantis" in message)
        if "damaged" in message or (slow and fraction - shown[0] >= 0.1):
            print(f"[{fraction:4.0%}] {message}", file=sys.stderr)
            shown[0] = fraction

    return progress


def prompt_progress():
    """A long prompt's reading as a line on stderr after each part (engine.decoding.prefill): a prompt file of
    thousands of tokens is read for a minute before the first step, which would otherwise be a silent wait."""
    def on_part(read: int, total: int) -> None:
        if read:
            print(f"[{read / total:4.0%}] reading the prompt: {read:,} of {total:,} tokens", file=sys.stderr)

    return on_part


def lens_main(args) -> int:
    try:
        if not 1 <= args.top <= 20:
            raise ConfigError("top", f"--top: must be between 1 and 20, got {args.top}")
        from engine.inside.lens import lens_next
        from engine.model import load_model

        if args.prompt_file is not None:
            args.prompt = read_prompt_file(args.prompt_file)
        check_prompt_text(args.prompt)
        if not args.prompt.strip():
            raise ConfigError("prompt", "prompt: is empty; type some text for the model to continue")
        lm = load_model(args.model, progress=load_progress(), device=args.device, dtype=args.dtype)
        lens = lens_next(lm, args.prompt, args.chat, args.top)
    except DecodeScopeError as exc:
        return say_error(exc)
    except KeyboardInterrupt:
        return 130
    try:
        write_stdout(format_lens(lens) + "\n")
    except DecodeScopeError as exc:
        return say_error(exc)
    return 0


def _load_for_answers(args):
    from engine.model import load_model

    check_json_target(args.json)
    return load_model(args.model, progress=load_progress(), device=args.device, dtype=args.dtype)


def _served(args, config):
    """The decode on a server: the model, where it runs and its chat template are the server's business."""
    from engine.served import Server
    from engine.served.decode import served_decode

    for flag, value, default in (("--device", args.device, "auto"), ("--dtype", args.dtype, "auto"),
                                 ("--chat", args.chat, False)):
        if value != default:
            raise ConfigError(flag.strip("-"), f"{flag}: a served model runs where and as its server runs it; "
                                               f"leave {flag} out with --server")
    if not 0 < args.timeout <= 3600:
        raise ConfigError("timeout", f"--timeout: must be between 0 and 3600 seconds, got {args.timeout:g}")
    server = Server.connect(args.server, args.model, timeout=args.timeout)
    return served_decode(server, args.prompt, config)


def _draft_model(config, args):
    """The second model of a 'model:NAME' draft, loaded where the target runs; None for the other drafts."""
    if config.strategy != "speculative":
        return None
    kind, name = draft_spec(config.draft)
    if kind != "model":
        return None
    from engine.model import load_model

    return load_model(name, progress=load_progress(), device=args.device, dtype=args.dtype)


def format_rounds(trace) -> str:
    """One line per speculative round: each draft kept (+), rejected (x) or never checked (.), then the target's
    own token (corrected or bonus); then the acceptance figures beside what they predict."""
    from engine.speculative.summary import acceptance

    marks = {"kept": "+", "rejected": "x", "unchecked": "."}
    tails = {"corrected": "(corrected)", "bonus": "(bonus)"}
    lines = [f"{'round':>5}  {'steps':<9} drafts (+ kept, x rejected, . unchecked)  ->  the target's token"]
    for rnd in trace.rounds:
        drafts = " ".join(f"{marks[d.status]}{_show(d.text)}" for d in rnd.drafts) or "(no draft)"
        tail = (f"->  {_show(rnd.next_text)} {tails[rnd.next_kind]}" if rnd.next_id is not None
                else "(ended at a kept end-of-text)")
        first, n = rnd.first_step + 1, len(rnd.emitted_ids)
        steps = f"{first}-{first + n - 1}" if n > 1 else f"{first}"
        lines.append(f"{rnd.index + 1:>5}  {steps:<9} {drafts}  {tail}")
    acc, config = acceptance(trace), trace.config
    lines += ["", f"draft {config.draft}, K = {config.draft_tokens} (fixed), verify {config.verify}",
              f"acceptance alpha = {acc.kept}/{acc.checked} = {acc.alpha:.3f}; tokens per round "
              f"{acc.tokens_per_round:.2f} measured, (1 - alpha^(K+1)) / (1 - alpha) = {acc.predicted:.2f} predicted",
              f"target passes {acc.target_passes} for {acc.tokens} tokens "
              f"({acc.target_passes / max(acc.tokens, 1):.2f} per token; plain decoding takes 1), "
              f"draft passes {acc.draft_passes}"]
    return "\n".join(lines)


def _checked_config(args) -> DecodeConfig:
    """The decode's settings from the command line, and the prompt read and checked: a ConfigError naming what
    is wrong before any model loads."""
    config = config_from_args(args).replace(**grammar_settings(args))
    try:
        config.validate()
    except ConfigError as exc:           # a sampler setting's error names its flag, as typed
        raise soft_flagged(flagged(exc)) from None
    check_json_target(args.json)
    if args.prompt_file is not None:
        args.prompt = read_prompt_file(args.prompt_file)
    check_prompt_text(args.prompt)
    if not args.prompt.strip():
        raise ConfigError("prompt", "prompt: is empty; type some text for the model to continue")
    if args.server is not None and config.strategy == "speculative":
        raise ConfigError("server", "--server: speculative decoding runs the target here, on the loaded "
                                    "model's logits; leave --server out")
    return config


def _run(args, config: DecodeConfig) -> Trace:
    """The decode: on the server named, else on the model loaded here; with its findings when asked."""
    if args.server is not None:
        trace = _served(args, config)
    else:
        from engine.decoding.prefill import watching_prompts
        from engine.model import load_model            # PyTorch and transformers: only once the input is good
        from engine.strategies import decode

        lm = load_model(args.model, progress=load_progress(), device=args.device, dtype=args.dtype)
        with watching_prompts(prompt_progress()):
            trace = decode(lm, args.prompt, config, draft_lm=_draft_model(config, args))
    if args.explain:
        from engine.explain.findings import with_findings

        trace = with_findings(trace)
    return trace


def _report(args, trace: Trace) -> None:
    """The trace as the user asked: JSON on standard output, or the table (stages, grammar, rounds, findings,
    which numbers a server gave) and the JSON file."""
    if args.json == "-":
        write_stdout(trace.to_json() + "\n")
        return
    if trace.steps and trace.steps[0].grammar is not None and not args.stages:
        out = format_grammar_table(trace, _show)
    else:
        out = format_stages_table(trace) if args.stages else format_table(trace)
    if trace.rounds:
        out += "\n\n" + format_rounds(trace)
    if trace.config.strategy in SOFT_INPUT_STRATEGIES:
        out += "\n\n" + format_fed(trace, _show)
    if args.explain:
        from engine.explain.findings import format_findings

        out += "\n\n" + format_findings(trace)
    served = trace.model_facts.get("served")
    if isinstance(served, dict):              # which numbers the table shows: raw, or after the server's chain
        from engine.served.numbers import describe

        out += "\n" + describe(served)
        from engine.served.samplers import ignored_note

        note = ignored_note(served.get("server", ""), trace.config)
        out += f"\n{note}" if note else ""
    write_stdout(out + "\n")
    if args.json:
        write_file(args.json, trace.to_json())
        print(f"trace written to {args.json}", file=sys.stderr)


def main(argv=None, prog: str = "python -m engine") -> int:
    """Run a command; `prog` is how the user called it (see build_parser)."""
    args = build_parser(prog).parse_args(argv)
    if sys.stdout is None:               # started with its standard output closed: nothing could be shown
        return say_error(DecodeScopeError("standard output is closed; nothing could be written"))
    if args.command == "lens":
        return lens_main(args)
    if args.command == "answers":
        return answers_main(args, read_prompt_file, check_prompt_text, _load_for_answers)
    if args.command == "lesson":
        return lesson_main(args)
    if args.command == "reproduce":
        return reproduce_main(args)
    try:
        trace = _run(args, _checked_config(args))
    except DecodeScopeError as exc:
        partial = getattr(exc, "trace", None)     # a served decode cut short: the steps received, then why
        if partial is not None and args.json != "-":
            with contextlib.suppress(DecodeScopeError):
                write_stdout(format_table(partial) + "\n")
        return say_error(exc)
    except KeyboardInterrupt:
        return 130
    try:
        _report(args, trace)
    except DecodeScopeError as exc:
        return say_error(exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
