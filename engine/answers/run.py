"""One look at whole answers: the tree, where greedy and beam search land, and N samples; as one record
that the CLI prints, the page draws, and a JSON file carries (record.py)."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..tokens import encode_prompt
from .landed import Landing, land, landings
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


def explore(lm: LoadedModel, prompt: str, settings: TreeSettings, chat: bool = False, beams=(1,),
            samples: int = 0, seed: int = 0, should_stop=None, progress=None) -> AnswersRun:
    """The tree first (Stop keeps what it has), then greedy and the beams, then the samples; the prompt's
    forward pass runs once for all of them. progress(fraction, line, snapshot) is called through every part,
    and should_stop() polled between passes: a stop after the tree keeps the tree (said to be stopped) with
    the landings so far and no samples."""
    settings.check()
    prompt_ids = encode_prompt(lm, prompt, chat, settings.depth + 1)
    cache = read_prompt(lm, prompt_ids, should_stop, progress)
    tree = grow_tree(lm, prompt_ids, settings, should_stop=should_stop, progress=progress, prompt=cache)
    if tree.stopped:
        return AnswersRun(lm.name, prompt, chat, tree, seed=seed)
    stop = should_stop if should_stop is not None else (lambda: False)
    show = progress if progress is not None else (lambda fraction, line, snapshot: None)
    landed = tuple(landings(lm, prompt, tree, chat, list(beams), cache, stop,
                            lambda done, of, name: show(done / of, f"{name}: decoding ({done + 1} of {of})",
                                                        lambda: tree)))
    if len(landed) < 1 + sum(1 for w in beams if w > 1) or (samples and stop()):
        return AnswersRun(lm.name, prompt, chat, replace(tree, stopped=True), landed, seed=seed)
    summary, sampled = None, ()
    if samples:
        summary = draw_samples(lm, prompt_ids, settings, samples, seed, prompt=cache, should_stop=stop,
                               progress=lambda done, depth: show(done / depth, f"{samples:,} samples: token "
                                                                                f"{done} of {depth}", lambda: tree))
        if summary is None:
            return AnswersRun(lm.name, prompt, chat, replace(tree, stopped=True), landed, seed=seed)
        sampled = tuple(_rank_sample(tree, o) for o in summary.outcomes if o.complete)
    return AnswersRun(lm.name, prompt, chat, tree, landed, summary, sampled, seed)


def _rank_sample(tree: AnswerTree, outcome) -> Landing:
    """A sample's landing: its exact probability came with it, so only the rank is worked out here."""
    found = any(a.token_ids == outcome.token_ids for a in tree.answers)
    return Landing("sample", outcome.token_ids, outcome.text, True, outcome.logprob, tree.rank_of(outcome.logprob),
                   found, tree.beyond_reach(outcome.logprob))


__all__ = ["AnswersRun", "explore", "land"]
