"""One look at whole answers: the tree, where greedy and beam search land, and N samples; as one record
that the CLI prints, the page draws, and a JSON file carries (record.py)."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..tokens import encode_prompt
from .landed import Landing, land, landings
from .samples import SampleSummary, draw_samples
from .tree import AnswerTree, TreeSettings, grow_tree
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
            samples: int = 0, seed: int = 0, should_stop=None, progress=None, on_tree=None,
            on_phase=None) -> AnswersRun:
    """The tree first (Stop keeps what it has), then greedy and the beams, then the samples. on_tree(tree): called
    once the tree is grown, before the rest (a page draws it while the strategies and samples run);
    on_phase(name): as "strategies" and "samples" begin. A stop asked for after the tree keeps the tree, marked
    stopped, without the rest."""
    settings.check()
    prompt_ids = encode_prompt(lm, prompt, chat, settings.depth + 1)
    tree = grow_tree(lm, prompt_ids, settings, should_stop=should_stop, progress=progress)
    if tree.stopped:
        return AnswersRun(lm.name, prompt, chat, tree, seed=seed)
    if on_tree is not None:
        on_tree(tree)

    def stopped() -> AnswersRun | None:
        if should_stop is not None and should_stop():
            return AnswersRun(lm.name, prompt, chat, replace(tree, stopped=True), seed=seed)
        return None

    if on_phase is not None:
        on_phase("strategies")
    if (early := stopped()) is not None:
        return early
    landed = tuple(landings(lm, prompt, tree, chat, list(beams)))
    summary, sampled = None, ()
    if samples:
        if on_phase is not None:
            on_phase("samples")
        if (early := stopped()) is not None:
            return early
        summary = draw_samples(lm, prompt_ids, settings, samples, seed)
        sampled = tuple(_rank_sample(tree, o) for o in summary.outcomes if o.complete)
    return AnswersRun(lm.name, prompt, chat, tree, landed, summary, sampled, seed)


def _rank_sample(tree: AnswerTree, outcome) -> Landing:
    """A sample's landing: its exact probability came with it, so only the rank is worked out here."""
    found = any(a.key == (outcome.token_ids, outcome.text) for a in tree.answers)
    return Landing("sample", outcome.token_ids, outcome.text, True, outcome.logprob, tree.rank_of(outcome.logprob),
                   found, tree.beyond_reach(outcome.logprob))


__all__ = ["AnswersRun", "explore", "land"]
