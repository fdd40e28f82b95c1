"""What each beam's KV cache holds after every step of a trace, rebuilt from the trace alone.

A trace records per step the measured cache size (KVStep) and, for beam search, the
running beams' node ids. From those this module rebuilds, per step and beam slot:
the tokens whose keys and values the slot holds, how many of its rows were already
there (reused), written by this step's forward pass (appended), or copied in from
another slot when the beams were reordered; and the paged layout a shared-prefix
cache would use for the same sequences (engine.decoding.kv.paged_layout).
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.decoding.kv import BLOCK_SIZE, paged_layout


@dataclass(frozen=True)
class BeamCache:
    slot: int
    parent: int          # slot whose cache this beam continues (itself unless the beams reordered)
    tokens: list         # token ids held in its rows, in order
    reused: int          # rows already in this slot before the step
    appended: int        # rows written into this slot by this step's forward pass
    copied: int          # rows copied in from the parent slot by the reorder


@dataclass(frozen=True)
class PagedBlock:
    index: int           # block position in a sequence (0 = first BLOCK_SIZE tokens)
    tokens: list
    refs: int            # beams pointing at it
    beams: list
    full: bool


@dataclass(frozen=True)
class CacheStep:
    step: int
    beams: list          # [BeamCache]
    rows: int            # measured on the cache tensors, all slots
    bytes: int           # measured on the cache tensors
    paged_blocks: list   # [PagedBlock], shared blocks once
    paged_tables: list   # per beam: indices into paged_blocks
    paged_bytes: int     # accounting: blocks x block size x bytes per row



def cache_steps(trace, bytes_per_row: int, block_size: int = BLOCK_SIZE) -> list:
    """[CacheStep] for every step of a greedy, sample, soft, gumbel or beam trace."""
    prompt = list(trace.prompt_token_ids)
    P = len(prompt)
    nodes_by_id = {n.id: n for n in trace.nodes}
    generated = [s.chosen_ids[0] for s in trace.steps]   # one-sequence traces: the chosen tokens in order
    out = []
    for step in trace.steps:
        t = step.index
        if step.beam_node_ids:
            slots = []
            for node_id in step.beam_node_ids:
                path = [n.token_id for n in trace.path(node_id)]
                slots.append((nodes_by_id[node_id].beam, prompt + path[:-1]))
        else:
            slots = [(0, prompt + generated[:t])]
        beams = []
        for slot, (parent, tokens) in enumerate(slots):
            new_rows = P if t == 0 else 1
            if parent != slot:
                beams.append(BeamCache(slot, parent, tokens, reused=0, appended=0, copied=len(tokens)))
            else:
                beams.append(BeamCache(slot, parent, tokens, reused=len(tokens) - new_rows, appended=new_rows,
                                       copied=0))
        layout = paged_layout([b.tokens for b in beams], block_size=block_size)
        blocks = [PagedBlock(b.index, list(b.tokens), b.refs, list(b.beams), b.full) for b in layout.blocks]
        out.append(CacheStep(step=t, beams=beams, rows=step.kv.rows, bytes=step.kv.bytes, paged_blocks=blocks,
                             paged_tables=[list(x) for x in layout.tables],
                             paged_bytes=len(blocks) * block_size * bytes_per_row))
    return out
