"""The beam tree page reads well: Play starts at step 1, one colour scale, endings visible, plain reasons."""
from __future__ import annotations

import html
import math
import re
from pathlib import Path

import torch
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]

from engine import DecodeConfig, decode  # noqa: E402
from figures.labels import visible  # noqa: E402
from figures.beam_tree import beam_tree_figure, short_label  # noqa: E402


def open_beam(folder: str, **state) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["model"] = folder
    at.session_state["prompt"] = "The capital of France is"
    at.session_state["max_new_tokens"] = 5
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page("pages/beam_tree.py").run()
    assert not at.exception, at.exception
    return at


def test_play_shows_every_step_from_the_first(tiny_llama_folder):
    """Play is a timer on the tree's fragment; AppTest runs no timers, so each tick is one run here."""
    _, folder = tiny_llama_folder
    at = open_beam(folder, num_beams=3)
    last = int(at.slider(key="beam_upto").max)
    at.button(key="beam_play").click().run()
    frames = [at.session_state["beam_upto"]]
    for _ in range(last + 1):
        if not at.session_state["beam_playing"]:
            break
        at.run()
        frames.append(at.session_state["beam_upto"])
    assert not at.exception, at.exception
    assert frames == list(range(1, last + 1)) + [last]     # 1, 2, ..., last; the tick after the last ends Play
    assert at.session_state["beam_upto"] == last and at.session_state["beam_playing"] is False


def test_one_colour_scale_for_every_frame(tiny):
    trace = decode(tiny, "The capital of", DecodeConfig(strategy="beam", num_beams=3, max_new_tokens=5))
    scores = [n.cum_logprob for n in trace.nodes if n.parent is not None and math.isfinite(n.cum_logprob)]
    for upto in range(len(trace.steps)):
        fig = beam_tree_figure(trace, upto_step=upto)
        marker = next(d.marker for d in fig.data if d.marker is not None and d.marker.cmin is not None)
        assert (marker.cmin, marker.cmax) == (min(scores), max(scores))


def test_labels_are_short_and_alternate_sides(tiny):
    assert short_label("Kingdom") == "Kingdom"
    assert short_label(" approximately") == " approxi…"
    trace = decode(tiny, "The capital of", DecodeConfig(strategy="beam", num_beams=3, max_new_tokens=4))
    fig = beam_tree_figure(trace)
    kept = next(d for d in fig.data if d.mode == "markers+text" and d.text is not None and len(d.x) > 1)
    sides = {(int(x), pos) for x, pos in zip(kept.x, kept.textposition)}
    assert {pos for x, pos in sides if x % 2 == 0} == {"bottom center"} or not [x for x, _ in sides if x % 2 == 0]
    assert {pos for x, pos in sides if x % 2 == 1} <= {"top center"}
    assert all(len(html.unescape(label)) <= 9 for label in kept.text)


def plain(cell: str) -> str:
    """A table cell as read: Markdown escapes and the invisible line-break points removed."""
    return re.sub(r"\\(.)", r"\1", cell).replace("\u200b", "")


def test_hypotheses_are_whole_and_marked_where_they_leave_the_best(tiny_llama_folder):
    """The returned hypotheses are transformers' beam search's; each is shown whole, ┃ where it leaves the
    best one's tokens, and the first token that differs is named beside it."""
    lm, folder = tiny_llama_folder
    at = open_beam(folder, num_beams=3)
    ids = torch.tensor([lm.tokenizer("The capital of France is").input_ids])
    out = lm.model.generate(ids, max_new_tokens=5, do_sample=False, num_beams=3, num_return_sequences=3,
                            attention_mask=torch.ones_like(ids))[:, ids.shape[1]:].tolist()
    returned = [seq[:seq.index(0) + 1] if 0 in seq else seq for seq in out]       # up to end-of-text (id 0)
    best = returned[0]
    table = at.table[0].value
    rows = {plain(text): plain(parts) for text, parts in zip(table["text"], table["leaves #1 at"])}
    for seq in returned:
        shared = next((i for i, (a, b) in enumerate(zip(seq, best)) if a != b), min(len(seq), len(best)))
        words = [visible(lm.token_texts[t]) for t in seq]
        text = "".join(words) if seq == best else "".join(words[:shared]) + "┃" + "".join(words[shared:])
        assert text in rows, (text, list(rows))
        if seq != best and shared < min(len(seq), len(best)):
            theirs = visible(lm.token_texts[best[shared]])
            assert rows[text] == f"step {shared + 1}: {words[shared]} (#1: {theirs})"
    assert not any(cell.startswith("…") for cell in rows)          # never folded


def test_equal_lengths_say_why_the_penalty_moves_nothing(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = open_beam(folder, num_beams=2)
    table = at.table[0].value
    lengths = set(table["tokens"])
    if len(table) > 1 and len(lengths) == 1:
        assert any(f"has {lengths.pop()} tokens" in i.value and "cannot change their order" in i.value
                   for i in at.info)
    else:
        assert not any("cannot change their order" in i.value for i in at.info)
