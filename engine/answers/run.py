"""One look at whole answers: the tree, where greedy and beam search land, and N samples; as one record
that the CLI prints, the page draws, and a JSON file carries (record.py)."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..config import MAX_SEED      # the one range of a seed: a decode's, the samples', a file's
from ..errors import ConfigError, quoted
from engine.tokens import encode_prompt
from .landed import Landing, check_beam_cost, land, landings
from .samples import SampleSummary, draw_samples
from .tree import AnswerTree, TreeSettings, grow_tree, read_prompt
from ..model import LoadedModel


@dataclass(frozen=True)
class AnswersRun:
    model: str
    prompt: str
    chat: bool
    tree: AnswerTree
    landings: tuple = ()             # greedy, then each beam width
    samples: SampleSummary | None = None
    sample_landings: tuple = ()      # each distinct complete sample, ranked among the tree's answers
    seed: int = 0
    agreement: object = None         # AgreementSettings: the agreement a file carries (agreement.py)




def check_seed(seed, name: str = "seed") -> int:
    """The seed of the samples, 0 to 2**63 - 1, checked before anything runs (a bigger one reached torch's
    generator as an overflow, or was written into a file no reader takes)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ConfigError("seed", f"{name}: must be a whole number from 0 to 2**63 - 1, got {quoted(seed)}")
    return seed


def explore(lm: LoadedModel, prompt: str, settings: TreeSettings, chat: bool = False, beams=(1,),
            samples: int = 0, seed: int = 0, should_stop=None, progress=None, on_tree=None,
            on_phase=None) -> AnswersRun:
    """The tree first (Stop keeps what it has), then greedy and the beams, then the samples; the prompt's
    forward pass runs once for all of them. progress(fraction, line, snapshot) is called through every part,
    and should_stop() polled between passes: a stop after the tree keeps the tree (said to be stopped) with the
    landings so far and no samples. on_tree(tree): called once the tree is grown, before the rest (a page draws
    it while the strategies and samples run); on_phase(name): as "strategies" and "samples" begin."""
    settings.check()
    check_seed(seed)
    check_beam_cost(beams, settings.depth)
    prompt_ids = prompt_for_depth(lm, prompt, chat, settings.depth)
    cache = read_prompt(lm, prompt_ids, should_stop, progress)
    tree = grow_tree(lm, prompt_ids, settings, should_stop=should_stop, progress=progress, prompt=cache)
    if tree.stopped:
        return AnswersRun(lm.name, prompt, chat, tree, seed=seed)
    if on_tree is not None:
        on_tree(tree)
    stop = should_stop if should_stop is not None else (lambda: False)
    show = progress if progress is not None else (lambda fraction, line, snapshot: None)
    if on_phase is not None:
        on_phase("strategies")
    if stop():
        return AnswersRun(lm.name, prompt, chat, replace(tree, stopped=True), seed=seed)
    landed = tuple(landings(lm, prompt, tree, chat, list(beams), cache, stop,
                            lambda done, of, name: show(done / of, f"{name}: decoding ({done + 1} of {of})",
                                                        lambda: tree)))
    if len(landed) < 1 + sum(1 for w in beams if w > 1) or (samples and stop()):
        return AnswersRun(lm.name, prompt, chat, replace(tree, stopped=True), landed, seed=seed)
    summary, sampled = None, ()
    if samples:
        if on_phase is not None:
            on_phase("samples")
        summary = draw_samples(lm, prompt_ids, settings, samples, seed, prompt=cache, should_stop=stop,
                               progress=lambda done, depth: show(done / depth, f"{samples:,} samples: token "
                                                                                f"{done} of {depth}", lambda: tree))
        if summary is None:
            return AnswersRun(lm.name, prompt, chat, replace(tree, stopped=True), landed, seed=seed)
        sampled = tuple(_rank_sample(tree, o) for o in summary.outcomes if o.complete)
    return AnswersRun(lm.name, prompt, chat, tree, landed, summary, sampled, seed)


def prompt_for_depth(lm: LoadedModel, prompt: str, chat: bool, depth: int) -> list:
    """The prompt's token ids, with room in the context for an answer of `depth` tokens and its end; a prompt
    that leaves less is named with the setting that asks for the room, the depth."""
    try:
        return encode_prompt(lm, prompt, chat, depth + 1)
    except ConfigError as exc:
        if exc.param != "max_new_tokens":
            raise
        context = lm.facts.context_length
        used = len(encode_prompt(lm, prompt, chat))
        room = context - used - 1
        advice = f"at most {room} here, or a shorter prompt" if room >= 1 else "shorten the prompt"
        raise ConfigError("depth", f"depth: the prompt ({used:,} tokens) and an answer of {depth} tokens with its "
                                   f"end need {used + depth + 1:,} tokens, more than the model's context of "
                                   f"{context:,}; {advice}", "context", prompt=f"{used:,}", depth=depth,
                          context=f"{context:,}", most=room) from None


def _rank_sample(tree: AnswerTree, outcome) -> Landing:
    """A sample's landing: its exact probability came with it, so only the rank is worked out here."""
    found = tree.answer_for(outcome.token_ids, outcome.text) is not None
    return Landing("sample", outcome.token_ids, outcome.text, True, outcome.logprob, tree.rank_of(outcome.logprob),
                   found, tree.beyond_reach(outcome.logprob))


__all__ = ["AnswersRun", "MAX_SEED", "check_seed", "explore", "land"]
