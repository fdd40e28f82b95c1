"""The command line's constrained decoding: `--json-schema FILE | --regex PATTERN | --choices A,B,C | --lark FILE`,
and the table that shows, per step, what the grammar's mask allowed and how much of the model's probability it kept.
"""
from __future__ import annotations

import json

from engine.cli.files import check_argument_text, read_text_file
from engine.config import MAX_GRAMMAR_BYTES
from engine.errors import ConfigError


def add_grammar_arguments(parser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--json-schema", metavar="FILE", help="constrain the output to JSON matching the JSON Schema "
                                                            "in FILE (greedy, sample, beam)")
    group.add_argument("--regex", metavar="PATTERN", help="constrain the output to text the regular expression "
                                                          "matches whole")
    group.add_argument("--choices", metavar="A,B,C", help="constrain the output to one of these comma-separated texts")
    group.add_argument("--lark", metavar="FILE", help="constrain the output to the Lark grammar in FILE")


def _read(flag: str, path: str) -> str:
    return read_text_file(path, flag=flag, field="grammar", limit=MAX_GRAMMAR_BYTES,
                          too_big=f"over {MAX_GRAMMAR_BYTES:,} bytes, the most a grammar may be")


def grammar_settings(args) -> dict:
    """{'grammar_kind', 'grammar'} for DecodeConfig from the flags ({} without one), checked before any model
    is loaded: a file that is not JSON, a pattern that does not compile, are named here."""
    if args.json_schema is not None:
        kind, text = "json_schema", _read("--json-schema", args.json_schema)
    elif args.regex is not None:
        check_argument_text(args.regex, flag="--regex", field="grammar")
        kind, text = "regex", args.regex
    elif args.choices is not None:
        check_argument_text(args.choices, flag="--choices", field="grammar")
        kind, text = "choices", json.dumps([c.strip() for c in args.choices.split(",")], ensure_ascii=False)
    elif args.lark is not None:
        kind, text = "lark", _read("--lark", args.lark)
    else:
        return {}
    if len(text.encode("utf-8", "surrogatepass")) > MAX_GRAMMAR_BYTES:
        raise ConfigError("grammar", f"grammar: is over {MAX_GRAMMAR_BYTES:,} bytes, the most a grammar may be")
    from engine.grammar.constrain import check_grammar          # llguidance and PyTorch: only once a grammar is given

    check_grammar(kind, text)
    return {"grammar_kind": kind, "grammar": text}


def format_grammar_table(trace, show) -> str:
    """One line per step: the chosen token, its probability after the mask, how many tokens the mask allowed,
    Z_t (the model's probability on them before the mask), 'forced' where one token was allowed, and the most
    likely token the mask removed. show: how the CLI prints a token's text."""
    vocab = trace.model_facts.get("vocab_size", 0)
    lines = [f"{'step':>4}  {'chosen':<18} {'p|mask':>7}  {'allowed':>9}  {'Z_t':>7}  {'':6}  most likely removed"]
    for step in trace.steps:
        g = step.grammar
        chosen = step.chosen
        shaped = chosen.shaped_prob if chosen is not None else float("nan")
        removed = f"{show(g.removed[0].text)} {g.removed[0].prob:.3f}" if g.removed else "-"
        lines.append(f"{step.index + 1:>4}  {show(step.chosen_texts[0]):<18} {shaped:>7.4f}  {g.allowed:>9,}  "
                     f"{g.feasible_mass:>7.4f}  {'forced' if g.forced else '':6}  {removed}")
    forced = sum(1 for s in trace.steps if s.grammar.forced)
    lines.append(f"(allowed: of a vocabulary of {vocab:,}; Z_t: the probability the model gave the allowed tokens "
                 f"before the mask; {forced} of {len(trace.steps)} steps forced)")
    lines.append("")
    for i, seq in enumerate(trace.sequences):
        lines.append(f"[{i}] cum_logprob {seq.cum_logprob:.4f}  score {seq.score:.4f}  {seq.text!r}")
    from engine.grammar.constrain import STOP_WORDS, output_check, stop_reason

    config = trace.config
    valid, why = output_check(config.grammar_kind, config.grammar, trace.best.text)
    mark = {True: "valid", False: "NOT valid", None: "checked by the grammar only"}[valid]
    if config.strategy == "beam":
        lines.append(f"grammar: {mark}: {why}")
    else:
        lines.append(f"grammar: {STOP_WORDS[stop_reason(trace)]}; {mark}: {why}")
    return "\n".join(lines)
