"""The interview page states, in both languages, that beam search is not a soft feed-back."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("navigation_frame")


@pytest.mark.parametrize("lang,words", [
    ("en", ("Beam search", "ranks discrete prefixes by their cumulative log-probability", "pᵀE")),
    ("zh", ("束搜索", "按累计对数概率给离散的前缀排序", "pᵀE")),
])
def test_beam_search_ranks_prefixes_not_a_collapsed_softmax(lang, words):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
    at.query_params.update({"lang": lang})
    at.switch_page("pages/interview.py").run()
    assert not at.exception, at.exception
    lines = [line for m in at.markdown for line in m.value.splitlines()]
    assert any(all(w in line for w in words) for line in lines)


@pytest.mark.parametrize("lang,bits,nats", [
    ("en", ("H = 1 bit and V = 0", "H ≈ 0.469 bits but V ≈ 0.904 bits²"), ("H ≈ 0.325 nats, V ≈ 0.435 nats²",)),
    ("zh", ("H = 1 比特，V = 0", "H ≈ 0.469 比特，V 却约为 0.904 比特²"), ("H ≈ 0.325 奈特，V ≈ 0.435 奈特²",)),
])
def test_the_entropy_card_quotes_what_the_engine_computes(lang, bits, nats):
    """The card's hand values for [0.5, 0.5] and [0.9, 0.1], in bits and in the page's nats, are the engine's."""
    import json
    import math

    import torch

    from engine.answers import entropy_and_varentropy

    answer = json.loads((ROOT / "assets" / "texts" / lang / "interview_wa.json").read_text("utf-8"))["entropy_a"]
    assert all(claim in answer for claim in bits + nats)
    h, v = entropy_and_varentropy(torch.tensor([[0.5, 0.5], [0.9, 0.1]], dtype=torch.float64).log())
    ln2 = math.log(2)
    assert (round(h[0].item() / ln2, 3), round(v[0].item() / ln2**2, 3)) == (1.0, 0.0)
    assert (round(h[1].item() / ln2, 3), round(v[1].item() / ln2**2, 3)) == (0.469, 0.904)
    assert (round(h[1].item(), 3), round(v[1].item(), 3)) == (0.325, 0.435)
