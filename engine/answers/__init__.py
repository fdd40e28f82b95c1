"""Whole answers: which text the model finds most likely, how much of the distribution a tree holds, and
how sure the model is of its answer.

  - passes.py: the forward passes: the prompt once, then many continuations of it in one batch;
  - tree.py: the continuation tree, best-first, with its exact ledger and the certificate for the top k;
  - bound.py: what holds the certificate back (an open prefix or a child left out) and what would move it;
  - samples.py: N seeded samples rescored exactly, Good–Turing beside the exact unsampled mass;
  - landed.py: where greedy, beam search and samples land among the answers;
  - meaning.py: answers grouped by normalised text, entropies over answers and groups;
  - distribution.py: the model's distribution or the sampler's, named on every number;
  - agreement.py: the answer the samples agree on (MBR, self-consistency), its expected utility bounded by
    the tree; agreement_text.py prints it;
  - run.py: one look at all of it (tree, landings, samples) as one record;
  - record.py: that record as JSON, read back with every field checked; consistency.py checks each node's own
    split, agreement_file.py the agreement part.
  - stops.py: where an answer ends: an end token, or a stop string as servers end a completion;
  - stop_beam.py: beam search whose hypotheses also end at a stop string (for the landings);
"""
from __future__ import annotations

from .distribution import DISTRIBUTIONS, Distribution, entropy_and_varentropy
from .landed import Landing, answer_logprob, landings, parse_beams
from .samples import MAX_SAMPLES, SampleSummary, draw_samples
from .tree import AnswerTree, Answer, Ledger, Prefix, TreeSettings, end_ids, grow_tree

__all__ = ["DISTRIBUTIONS", "Distribution", "entropy_and_varentropy", "Landing", "answer_logprob", "landings",
           "parse_beams", "MAX_SAMPLES", "SampleSummary", "draw_samples", "AnswerTree", "Answer", "Ledger",
           "Prefix", "TreeSettings", "end_ids", "grow_tree"]
