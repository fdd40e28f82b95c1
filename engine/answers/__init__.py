"""Whole answers: which text the model finds most likely, how much of the distribution a tree holds, and
how sure the model is of its answer.

  - tree.py: the continuation tree, best-first, with its exact ledger and the certificate for the top k;
  - samples.py: N seeded samples rescored exactly, Good–Turing beside the exact unsampled mass;
  - landed.py: where greedy, beam search and samples land among the answers;
  - meaning.py: answers grouped by normalised text, entropies over answers and groups;
  - distribution.py: the model's distribution or the sampler's, named on every number.
  - stops.py: where an answer ends: an end token, or a stop string as servers end a completion;
  - stop_beam.py: beam search whose hypotheses also end at a stop string (for the landings).
"""
from __future__ import annotations

from .distribution import DISTRIBUTIONS, Distribution, entropy_and_varentropy
from .landed import Landing, answer_logprob, landings, parse_beams
from .samples import MAX_SAMPLES, SampleSummary, draw_samples
from .tree import AnswerTree, Answer, Ledger, Prefix, TreeSettings, end_ids, grow_tree

__all__ = ["DISTRIBUTIONS", "Distribution", "entropy_and_varentropy", "Landing", "answer_logprob", "landings",
           "parse_beams", "MAX_SAMPLES", "SampleSummary", "draw_samples", "AnswerTree", "Answer", "Ledger",
           "Prefix", "TreeSettings", "end_ids", "grow_tree"]
