"""Step by step's uncertainty panel (AppTest, tiny Llama): the strip's bars are each step's entropy and
varentropy as a plain forward pass gives them, in nats and in bits."""
from __future__ import annotations

import math

import pytest
import torch

from app_helpers import PROMPT, figures, open_app

pytestmark = [pytest.mark.apptest, pytest.mark.tiny, pytest.mark.usefixtures("navigation_frame")]


def hand(lm, ids) -> tuple:
    with torch.inference_mode():
        p = torch.softmax(lm.model(input_ids=torch.tensor([ids])).logits[0, -1].double(), -1)
    h = -(p * p.log()).sum().item()
    return h, (p * (p.log() + h) ** 2).sum().item()


def test_strip_shows_each_steps_entropy_and_varentropy(tiny_loads):
    at = open_app("step_by_step", params={"step": 3}, new_tokens=3)
    strip = next(f for f in figures(at) if len(f["data"]) == 2 and f["data"][0]["type"] == "bar"
                 and f["data"][0].get("hovertemplate", "").find("H %{y") > 0)
    ids = tiny_loads.tokenizer(PROMPT)["input_ids"]
    want = []
    for _ in range(3):
        want.append(hand(tiny_loads, ids))
        with torch.inference_mode():
            ids = ids + [int(tiny_loads.model(input_ids=torch.tensor([ids])).logits[0, -1].argmax())]
    assert strip["data"][0]["y"] == pytest.approx([h for h, _ in want], abs=1e-4)
    assert strip["data"][1]["y"] == pytest.approx([v for _, v in want], abs=1e-4)
    at.segmented_control(key="sbs_uncertainty_unit").set_value("bits").run()
    strip = next(f for f in figures(at) if f["data"][0].get("hovertemplate", "").find("H %{y") > 0)
    assert strip["data"][0]["y"] == pytest.approx([h / math.log(2) for h, _ in want], abs=1e-4)
    assert strip["data"][1]["y"] == pytest.approx([v / math.log(2) ** 2 for _, v in want], abs=1e-4)


@pytest.mark.parametrize("lang,bits,nats", [("en", "bits", "nats"), ("zh", "比特", "奈特")])
def test_the_unit_switch_sets_the_steps_metrics_too(tiny_loads, monkeypatch, lang, bits, nats):
    """Switched to bits, the Entropy and Varentropy metrics beside the chart read in bits as well (H / ln 2,
    V / ln² 2 by hand), and the unit is named in the page's language."""
    at = open_app("step_by_step", params={"step": 1, "lang": lang}, new_tokens=1)
    h, v = hand(tiny_loads, tiny_loads.tokenizer(PROMPT)["input_ids"])
    metrics = {m.label: m.value for m in at.metric}
    entropy, varentropy = list(metrics.values())[:2]
    assert entropy == f"{h:.3f} {nats}" and varentropy == f"{v:.3f} {nats}²"
    # AppTest formats a click's label outside the page's run, where the language comes from no session: the
    # page's language is made the one it reads there too
    import ui.i18n
    monkeypatch.setattr(ui.i18n, "language", lambda: lang)
    at.segmented_control(key="sbs_uncertainty_unit").set_value("bits").run()
    entropy, varentropy = [m.value for m in at.metric][:2]
    assert entropy == f"{h / math.log(2):.3f} {bits}" and varentropy == f"{v / math.log(2) ** 2:.3f} {bits}²"
