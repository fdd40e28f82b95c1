"""Logit lens: read the next-token candidates out of every layer's residual stream.

The residual stream after layer l is passed through the model's own final norm and
unembedding, exactly as the last layer's output is. Skipping the norm reads the raw
stream, whose scale grows from layer to layer, and gives distributions the model never
computes. Row 0 is the embedding output, row L the last layer's output: the lens at
row L is the model's own logits, and `Lens.matches_model` checks that it is.

It needs the model (one forward pass over the sequence, no decoding) and reads token
ids, so it applies to runs that fed tokens back (not soft or mixture Gumbel runs).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from engine.errors import ConfigError
from engine.model import LoadedModel
from engine.decoding.runner import forward_kwargs
from engine.tokens import encode_prompt

NORM_NAMES = ("norm", "ln_f", "final_layer_norm", "final_layernorm", "layer_norm")
ROWS = 128          # (layer, position) rows projected onto the vocabulary at once: a [128, vocab] block
MATCH_TOLERANCE = 1e-3


@dataclass(frozen=True)
class LensCell:
    """One layer at one step."""
    top_ids: list        # the layer's top tokens, best first
    top_texts: list
    top_probs: list
    chosen_prob: float   # probability of the token the run chose
    chosen_rank: int     # its rank at this layer (1 = top)


@dataclass(frozen=True)
class Lens:
    steps: list          # step index of each column
    chosen_ids: list     # token chosen at each step
    chosen_texts: list
    cells: list          # [layer][column] LensCell; layer 0 = embeddings, layer L = last layer
    max_diff: float      # largest |lens at the last layer - model logits|
    context: list = field(default_factory=list)   # the token ids read (prompt and generated)

    @property
    def layers(self) -> int:
        return len(self.cells)

    @property
    def matches_model(self) -> bool:
        return self.max_diff <= MATCH_TOLERANCE

    def first_top_layer(self, column: int) -> int | None:
        """The first layer where the chosen token is the top candidate, or None if no layer has it on top."""
        for layer, row in enumerate(self.cells):
            if row[column].chosen_rank == 1:
                return layer
        return None

    def column_of(self, step: int) -> int | None:
        return self.steps.index(step) if step in self.steps else None


def final_norm(model):
    """The norm the model applies after its last layer, found by the names transformers uses."""
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    for owner in (decoder, getattr(model, "base_model", None), model):
        for name in NORM_NAMES:
            module = getattr(owner, name, None) if owner is not None else None
            if isinstance(module, torch.nn.Module):
                return module
    raise ConfigError("model", f"lens: cannot find the final norm of {type(model).__name__}", "lens_no_norm",
                      kind=type(model).__name__)


@torch.inference_mode()
def residual_streams(lm: LoadedModel, token_ids: list, first: int = 0) -> tuple:
    """(streams [layers + 1, positions, hidden] before the final norm, the model's logits [positions, vocab]).

    Logits are asked for from position `first` on only, where the model supports it; earlier rows are NaN."""
    model = lm.model
    keep = {}
    if forward_kwargs(model) and first > 0:
        keep = {"logits_to_keep": len(token_ids) - first}
    norm = final_norm(model)
    captured = []
    handle = norm.register_forward_pre_hook(lambda module, args: captured.append(args[0]))
    try:
        out = model(input_ids=torch.tensor([token_ids], device=lm.device), output_hidden_states=True, use_cache=False,
                    **keep)
    finally:
        handle.remove()
    if not captured or out.hidden_states is None:
        raise ConfigError("model", f"lens: {type(model).__name__} does not report its hidden states",
                          "lens_no_states", kind=type(model).__name__)
    # hidden_states[-1] is already normed by the model; the final norm's input is the last residual stream
    streams = list(out.hidden_states[:-1]) + [captured[-1]]
    logits = out.logits[0].float()
    if logits.shape[0] < len(token_ids):
        logits = torch.cat([torch.full((len(token_ids) - logits.shape[0], logits.shape[1]), float("nan")), logits])
    return torch.stack([s[0] for s in streams]).float(), logits


def read_lens(lm: LoadedModel, token_ids: list, positions: list, chosen: list | None = None, top: int = 5) -> Lens:
    """Lens of the predictions made at `positions` of `token_ids`; chosen[i] is the token taken there
    (default: the model's own top token at the last layer)."""
    streams, logits = residual_streams(lm, token_ids, first=min(positions))
    norm, head = final_norm(lm.model), lm.model.get_output_embeddings()
    index = torch.tensor(positions, dtype=torch.long)
    if chosen is None:
        chosen = logits[index].argmax(-1).tolist()
    chosen_t = torch.tensor(chosen, dtype=torch.long)
    layers = streams.shape[0]
    # every (layer, position) pair is one row; a block of rows shares one pass over the unembedding,
    # which is read from memory once per block instead of once per layer
    rows = streams[:, index].reshape(layers * len(positions), -1)
    picked_all = chosen_t.repeat(layers)
    flat, max_diff = [], 0.0
    with torch.inference_mode():
        for start in range(0, rows.shape[0], ROWS):
            block = head(norm(rows[start:start + ROWS].to(head.weight.dtype))).float()
            lse = torch.logsumexp(block, -1, keepdim=True)
            best = torch.topk(block, k=min(top, block.shape[-1]))
            picked = picked_all[start:start + ROWS]
            picked_logit = block.gather(1, picked[:, None])
            ranks = (block > picked_logit).sum(-1) + 1
            chosen_probs = (picked_logit - lse).exp()[:, 0]
            top_probs = (best.values - lse).exp()
            last = [r for r in range(block.shape[0]) if (start + r) // len(positions) == layers - 1]
            if last:      # the last layer's rows: compare with the model's own logits
                at = torch.tensor([(start + r) % len(positions) for r in last])
                max_diff = max(max_diff, float((block[last] - logits[index[at]]).abs().max()))
            for r in range(block.shape[0]):
                ids = best.indices[r].tolist()
                flat.append(LensCell(top_ids=ids, top_texts=[lm.token_texts[t] for t in ids],
                                     top_probs=top_probs[r].tolist(), chosen_prob=float(chosen_probs[r]),
                                     chosen_rank=int(ranks[r])))
    cells = [flat[layer * len(positions):(layer + 1) * len(positions)] for layer in range(layers)]
    return Lens(steps=list(range(len(positions))), chosen_ids=list(chosen),
                chosen_texts=[lm.token_texts[t] for t in chosen], cells=cells, max_diff=max_diff,
                context=list(token_ids))


def lens_of_trace(lm: LoadedModel, trace, sequence: int = 0, top: int = 5, previous: Lens | None = None) -> Lens:
    """The lens at every generated step of one of the trace's sequences.

    previous: a lens of an earlier, shorter state of the same run. In a causal model the
    earlier positions do not change, so only the new steps are projected (the costly part)."""
    config = trace.config
    if config.strategy == "soft" or (config.strategy == "gumbel" and not config.hard):
        raise ConfigError("strategy", "lens: this run fed back mixtures of embeddings, not tokens, so its "
                                      "layers cannot be re-read from the token ids; use another strategy",
                          "lens_vectors")
    generated = list(trace.sequences[sequence].token_ids)
    if not generated:
        raise ConfigError("steps", "lens: the run has no generated tokens yet", "lens_no_steps")
    ids = list(trace.prompt_token_ids) + generated
    first = len(trace.prompt_token_ids) - 1
    done = 0
    if previous is not None and previous.context == ids[:len(previous.context)] and \
            previous.steps == list(range(len(previous.steps))) and len(previous.steps) <= len(generated) and \
            len(previous.context) == len(trace.prompt_token_ids) + len(previous.steps) and \
            all(len(row) == len(previous.steps) for row in previous.cells):
        done = len(previous.steps)
        if done == len(generated):
            return previous
    fresh = read_lens(lm, ids, [first + s for s in range(done, len(generated))], generated[done:], top)
    if not done:
        return fresh
    return replace(previous, steps=list(range(len(generated))), chosen_ids=previous.chosen_ids + fresh.chosen_ids,
                   chosen_texts=previous.chosen_texts + fresh.chosen_texts,
                   cells=[old + new for old, new in zip(previous.cells, fresh.cells)],
                   max_diff=max(previous.max_diff, fresh.max_diff), context=ids)


def lens_next(lm: LoadedModel, prompt: str, chat: bool = False, top: int = 5) -> Lens:
    """The lens for the next token after `prompt` (the token greedy decoding would take)."""
    ids = encode_prompt(lm, prompt, chat, 1)
    return read_lens(lm, ids, [len(ids) - 1], None, top)
