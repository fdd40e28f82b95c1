"""Figures drawn from a served model's top-N: the 'other' bar, and the badge the figure carries."""
from __future__ import annotations

import pytest

from engine.trace import Candidate, Step
from figures.candidates import candidates_figure
from figures.served import badge_text, other_mass, served_facts, with_badge

PROBS = [0.5, 0.2, 0.1]


def step() -> Step:
    cands = [Candidate(token_id=i, text=f" t{i}", logit=0.0, prob=p, logprob=0.0, rank=i + 1, shaped_prob=p / 0.8,
                       kept=True) for i, p in enumerate(PROBS)]
    return Step(index=0, candidates=cands, entropy=1.0, shaped_entropy=1.0, removed_mass=0.0, kept_count=3,
                chosen_ids=[0], chosen_texts=[" t0"], seconds=0.0)


class Served:
    model_facts = {"name": "m", "served": {"url": "http://127.0.0.1:8000", "server": "vllm", "top_n": 3,
                                           "exact": False}}


def test_the_other_bar_holds_what_the_listed_tokens_leave_out():
    other = other_mass(step())
    assert other == pytest.approx(1 - sum(PROBS))
    fig = candidates_figure(step(), other=other)
    bars = [d for d in fig.data if d.type == "bar" and d.name == "other (not listed)"]
    assert len(bars) == 1 and bars[0].y[0] == pytest.approx(0.2) and bars[0].x[0] == 3
    assert list(fig.layout.xaxis.ticktext)[-1] == "other (not listed)"
    line = [d for d in fig.data if d.type == "scatter" and d.mode == "lines+markers"][0]
    assert list(line.x) == [0, 1, 2, 3] and line.y[-1] == pytest.approx(1.0)
    raw, shaped = fig.data[0], fig.data[1]
    assert raw.offsetgroup == bars[0].offsetgroup == "raw" and shaped.offsetgroup == "shaped"


def test_a_local_step_has_no_other_bar():
    fig = candidates_figure(step())
    assert all(d.name != "other (not listed)" for d in fig.data)
    assert fig.data[0].offsetgroup is None


def test_the_badge_names_the_server_and_the_other_share():
    text = badge_text(Served(), step())
    assert text == ("top-3 from vllm at http://127.0.0.1:8000, numbers that may be raw or after its sampler: "
                    "the listed tokens are exact, the other 20.0% is shown as 'other'")     # a trace from before
    assert badge_text(object(), step()) is None and served_facts(None) is None


def test_the_badge_on_a_figure_is_escaped_and_wrapped():
    long = "top-3 from <b>x</b> at http://h:1: " + "word " * 40
    fig = with_badge(candidates_figure(step()), long)
    shown = fig.layout.title.subtitle.text
    assert "<b>" not in shown and "&lt;b&gt;" in shown
    assert all(len(line.replace("&lt;", "<").replace("&gt;", ">")) <= 110 for line in shown.split("<br>"))
    assert shown.count("<br>") >= 1
    before = candidates_figure(step()).layout.margin.t
    assert fig.layout.margin.t > before
    assert with_badge(candidates_figure(step()), None).layout.title.subtitle.text is None


def test_a_chinese_badge_wraps_by_the_columns_it_takes():
    """Chinese characters are twice as wide as Latin ones and have no spaces to break at: each line of the
    subtitle fits 110 columns counted that way (the 中文 badge ran past the chart's right edge), and no
    character is lost."""
    import unicodedata

    long = "来自 http://127.0.0.1:33777 上 llama-cpp-python 的 top-5，原始数值（采样器之前）：列出的 token 是精确的，" \
           "其余 85.9% 显示为“其他”"
    lines = with_badge(candidates_figure(step()), long).layout.title.subtitle.text.split("<br>")
    columns = [sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line) for line in lines]
    assert len(lines) == 2 and max(columns) <= 110, columns
    assert "".join(lines).replace(" ", "") == long.replace(" ", "")
