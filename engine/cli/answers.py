"""`python -m engine answers`: the most likely whole answers, the mass the tree holds, and where greedy, beam
search and samples land. Prints the ranked answers and the ledger; `--json FILE` writes the run, which the
Whole answers page opens without the model."""
from __future__ import annotations

import math

from engine.errors import ConfigError

BITS = math.log(2)


def add_answers_arguments(p) -> None:
    from engine.config import (MAX_ANSWER_DEPTH as MAX_DEPTH, MAX_ANSWER_SAMPLES as MAX_SAMPLES,
                               MAX_TREE_BATCH as MAX_BATCH,
                         MAX_TREE_BRANCH as MAX_BRANCH, MAX_TREE_BUDGET as MAX_BUDGET)

    p.add_argument("--depth", type=int, default=8, help=f"tokens an answer may have before its end (1..{MAX_DEPTH})")
    p.add_argument("--budget", type=int, default=200, help=f"prefixes expanded, one row of a forward pass each "
                                                           f"(1..{MAX_BUDGET})")
    p.add_argument("--top", type=int, default=10, help="answers printed, most likely first (1..100)")
    p.add_argument("--branch", type=int, default=8, help=f"children kept per expanded prefix (1..{MAX_BRANCH})")
    p.add_argument("--batch", type=int, default=16, help=f"prefixes expanded per forward pass (1..{MAX_BATCH})")
    p.add_argument("--samples", type=int, default=0, help=f"seeded samples rescored exactly (0..{MAX_SAMPLES})")
    p.add_argument("--seed", type=int, default=0, help="seed of the samples (0..2**63 - 1)")
    p.add_argument("--beams", default="1,4", help="greedy (1) and the beam widths to place among the answers")
    p.add_argument("--distribution", default="model", choices=("model", "sampler"),
                   help="model: the model's own softmax (temperature 1, nothing cut); sampler: after the "
                        "temperature, top-k, top-p and min-p below")
    p.add_argument("--temperature", type=float, default=1.0, help="the sampler's temperature")
    p.add_argument("--top-k", type=int, default=0, help="the sampler's top-k (0: off)")
    p.add_argument("--top-p", type=float, default=1.0, help="the sampler's top-p (1: off)")
    p.add_argument("--min-p", type=float, default=0.0, help="the sampler's min-p (0: off)")
    p.add_argument("--stop", action="append", default=[], metavar="TEXT",
                   help="a stop string: an answer also ends before it, as a server's `stop` ends a completion "
                        "(repeat for several; \\n is a newline, \\t a tab, \\\\ a backslash)")
    p.add_argument("--json", metavar="FILE", help="write the run as JSON ('-' for standard output)")
    p.add_argument("--mbr", metavar="UTILITIES", help="choose by agreement (minimum Bayes risk) under these "
                                                      "utilities: exact,text,chrf,edit (comma-separated)")
    p.add_argument("--mbr-candidates", type=int, default=16, metavar="K",
                   help="candidates for --mbr: the tree's top answers, greedy's and the beams', the samples' (1..64)")


def settings_from_args(args):
    from engine.answers import Distribution, TreeSettings
    from engine.answers.landed import check_beam_cost, parse_beams
    from engine.answers.samples import MAX_SAMPLES

    if not 1 <= args.top <= 100:
        raise ConfigError("top", f"--top: must be between 1 and 100, got {args.top}")
    if not 0 <= args.samples <= MAX_SAMPLES:
        raise ConfigError("samples", f"--samples: must be between 0 and {MAX_SAMPLES}, got {args.samples}")
    from engine.answers.run import check_seed

    check_seed(args.seed, "--seed")
    dist = Distribution(args.distribution, args.temperature, args.top_k, args.top_p, args.min_p)
    if args.distribution == "model" and (args.temperature, args.top_k, args.top_p, args.min_p) != (1.0, 0, 1.0, 0.0):
        raise ConfigError("distribution", "--distribution: the sampler's settings apply to --distribution sampler; "
                                          "add it, or leave them out")
    from engine.answers.stops import check_stops, unescape

    try:
        stops = check_stops([unescape(s) for s in args.stop])
    except ConfigError as exc:
        raise ConfigError("stop", f"--{exc}") from None
    settings = TreeSettings(args.depth, args.budget, args.branch, args.batch, dist, stops)
    try:
        settings.check()
    except ConfigError as exc:
        raise ConfigError(exc.param, f"--{str(exc).replace('_', '-')}") from None
    try:
        beams = parse_beams(args.beams)
        check_beam_cost(beams, settings.depth)
    except ConfigError as exc:
        raise ConfigError(exc.param, f"--{exc}") from None
    return settings, beams


def agreement_from_args(args):
    """--mbr and --mbr-candidates as AgreementSettings, or None without --mbr; checked before the model loads."""
    from engine.answers.agreement import AgreementSettings, check_limit, parse_utilities

    if getattr(args, "mbr", None) is None:
        return None
    try:
        return AgreementSettings(parse_utilities(args.mbr), check_limit(args.mbr_candidates))
    except ConfigError as exc:
        raise ConfigError(exc.param, f"--{exc}") from None


def format_run(run, top: int) -> str:
    """The ranked answers with their probabilities, the ledger, and where each strategy landed."""
    from engine.answers.meaning import answer_entropy, count_entropy, group_entropy, normalise

    tree = run.tree
    led = tree.ledger
    from engine.answers.stops import describe

    lines = [f"distribution: {tree.settings.distribution.describe()}", f"ends: {describe(tree.settings.stops)}",
             f"{tree.expansions:,} prefixes expanded in {tree.passes:,} forward passes, {tree.seconds:.2f} s"
             + (" (stopped)" if tree.stopped else ""), "",
             f"{'rank':>4}  {'probability':>12}  {'log p':>8}  answer"]
    for i, a in enumerate(tree.answers[:top]):
        mark = "" if tree.beyond_reach(a.logprob) else "  ?"
        lines.append(f"{i + 1:>4}  {a.prob:>12.4e}  {a.logprob:>8.3f}  {_show(a.text)}{mark}")
    certified = tree.certified_count
    lines += ["", f"certified: the top {certified} found are the model's top {certified} among answers of at "
                  f"most {tree.settings.depth} tokens" if certified else "certified: none yet; " + _remedy(tree),
              f"(? : an answer not found could be more probable: the bound is {led.bound:.4e})", "",
              "ledger (adds up to 1):",
              f"  complete answers found  {led.answers:.6f}",
              f"  open prefixes           {led.open_prefixes:.6f}   (not expanded: the budget ran out)",
              f"  cut at the depth        {led.cut_at_depth:.6f}   (answers longer than {tree.settings.depth} "
              f"tokens)",
              f"  left out                {led.left_out:.6f}   (children not kept)",
              f"  total                   {led.total:.6f}"]
    if tree.answers:
        lines += ["", f"entropy of the answers found: {answer_entropy(tree.answers):.3f} nats; of their groups by "
                      f"normalised text: {group_entropy(tree.answers):.3f} nats (both renormalised over the "
                      f"{led.answers:.2%} of the mass the answers found hold)"]
    if run.landings:
        lines += ["", "where each strategy lands:"]
        for x in run.landings:
            lines.append(_landing_line(x))
    if run.samples is not None:
        s = run.samples
        done = [o for o in s.outcomes if o.complete]
        lines += ["", f"{s.samples} samples (seed {s.seed}): {len(s.outcomes)} distinct outcomes, "
                      f"{sum(o.count for o in done)} complete",
                  f"  mass never sampled: exact {s.unsampled:.4f}; Good-Turing estimate n1/N = "
                  f"{s.seen_once}/{s.samples} = {s.good_turing:.4f}",
                  f"  entropy of the samples' groups (counts): "
                  f"{count_entropy([normalise(o.text) for o in s.outcomes for _ in range(o.count)]):.3f} nats "
                  "(over every outcome drawn from the whole distribution, answers not found and cut ones included)"]
        for o in s.outcomes[:top]:
            kind = "" if o.complete else f"  (no end within {tree.settings.depth} tokens)"
            lines.append(f"  x{o.count:<3} {math.exp(o.logprob):.4e}  {_show(o.text)}{kind}")
    return "\n".join(lines)


CUT = "0 (the sampler cuts one of its tokens)"       # greedy and beam search read the model's own scores


def _remedy(tree) -> str:
    """Why nothing is certified, against the best answer found, and the setting that would help."""
    from engine.answers.bound import LEFT_OUT, NONE, what_bounds

    bound = what_bounds(tree)
    if bound.kind == NONE:
        return f"no answer ends within {tree.settings.depth} tokens; a larger --depth would let one end"
    best = (f"the best answer found ({tree.answers[0].prob:.4e})" if tree.answers else "no answer found yet, so "
            "nothing")
    if bound.kind == LEFT_OUT:
        return (f"{best} is below a child left out after prefix {_show(_prefix(tree, bound.node_id))} "
                f"({bound.mass:.4e}); more --branch would keep it, more --budget never reaches it")
    return (f"{best} is below the unexpanded prefix {_show(_prefix(tree, bound.node_id))} ({bound.mass:.4e}); "
            "more --budget would expand it")


def _prefix(tree, node_id: int) -> str:
    return "".join(n.text for n in tree.path(node_id))


def _landing_line(x) -> str:
    p = f"{math.exp(x.logprob):.4e}" if x.logprob > -math.inf else CUT
    if not x.complete:
        return f"  {x.strategy:<8} no end within the depth: {_show(x.text)} …  (prefix mass {p})"
    where = "found in the tree" if x.found else "not among the answers found"
    rank = f"rank {x.rank}" + ("" if x.exact_rank else " among those found")
    return f"  {x.strategy:<8} {rank:<26} p = {p}  {_show(x.text)}  ({where})"


def _show(text: str) -> str:
    return repr(text) if text else "'' (the empty answer)"


PROGRESS_SECONDS = 2.0      # a terminal gets a progress line at most this often


def terminal_progress(stream=None):
    """explore's progress as a line on a terminal's standard error every few seconds (a long run at the maxima
    shows it is working; Ctrl-C stops it); nothing when standard error is not a terminal."""
    import sys
    import time

    stream = stream if stream is not None else sys.stderr
    if not getattr(stream, "isatty", lambda: False)():
        return None
    shown = [time.monotonic()]

    def progress(fraction, line, snapshot) -> None:
        if time.monotonic() - shown[0] >= PROGRESS_SECONDS:
            shown[0] = time.monotonic()
            print(f"[{min(fraction, 1.0):4.0%}] {line}", file=stream, flush=True)
    return progress


def answers_main(args, read_prompt, check_prompt, load) -> int:
    """The command: settings checked before the model loads; errors as one line."""
    from engine.errors import DecodeScopeError
    from engine.cli.output import say_error, write_file, write_stdout

    try:
        settings, beams = settings_from_args(args)
        mbr = agreement_from_args(args)
        if args.prompt_file is not None:
            args.prompt = read_prompt(args.prompt_file)
        check_prompt(args.prompt)
        if not args.prompt.strip():
            raise ConfigError("prompt", "prompt: is empty; type some text for the model to continue")
        from engine.answers.record import to_checked_json
        from engine.answers.run import explore

        lm = load(args)
        try:
            run = explore(lm, args.prompt, settings, chat=args.chat, beams=beams, samples=args.samples,
                          seed=args.seed, progress=terminal_progress())
        except ConfigError as exc:       # a setting the run checks against the model: named as its flag
            if exc.param not in ("depth", "beams", "seed"):
                raise
            raise ConfigError(exc.param, f"--{exc}") from None
        agreement = None
        if mbr is not None:
            from dataclasses import replace

            from engine.answers.agreement import agree

            run = replace(run, agreement=mbr)
            agreement = agree(run, mbr.utilities, mbr.limit)
        if args.json == "-":
            write_stdout(to_checked_json(run, "--json", agreement) + "\n")
            return 0
        write_stdout(format_run(run, args.top) + "\n")
        if agreement is not None:
            from engine.answers.agreement_text import format_agreement

            write_stdout("\n" + format_agreement(agreement, run.tree.settings.distribution.describe()) + "\n")
        if args.json:
            write_file(args.json, to_checked_json(run, "--json", agreement))
    except DecodeScopeError as exc:
        return say_error(exc)
    except KeyboardInterrupt:
        return 130
    return 0
