"""A token the user forced, then the strategy switched to sampling (AppTest on Step by step, tiny random Llama).

"What happened?" must say the user forced the unlikely token, not that sampling drew it, and the main line
must still be shown beside the branch, replayed under the new settings. Expected tokens come from the
model's logits computed here with plain torch.
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from figures.labels import visible

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "The capital of France is"
STEPS = 6


def texts(lang: str, name: str) -> dict:
    return json.loads((ROOT / "assets" / "texts" / lang / f"{name}.json").read_text(encoding="utf-8"))


def greedy_ids(lm, prompt: str, steps: int) -> tuple[list, torch.Tensor]:
    """Greedy's tokens (ending at end-of-text, id 0), and the raw distribution after the first two."""
    ids = lm.tokenizer(prompt).input_ids
    out, third = [], None
    with torch.no_grad():
        for i in range(steps):
            probs = torch.softmax(lm.model(input_ids=torch.tensor([ids + out])).logits[0, -1].float(), -1)
            third = probs if i == 2 else third
            out.append(int(probs.argmax()))
            if out[-1] == 0:
                break
    return out, third


def hover_titles(fragment: str) -> list:
    """'step N: token' of every token chip in a token view's HTML, in order."""
    return [html.unescape(t).split(" · ")[0] for t in re.findall(r'<span title="([^"]*)"', fragment)
            if html.unescape(t).startswith("step ")]


@pytest.fixture(scope="module")
def switched(tiny_llama_folder):
    """(the model, greedy's tokens, the page) after: greedy, Next twice, force the rank-20 token at step 3,
    then Sample with top-k 1."""
    lm, folder = tiny_llama_folder
    main, third = greedy_ids(lm, PROMPT, STEPS)
    assert len(main) >= 3
    forced = int(torch.argsort(third, descending=True)[19])       # rank 20: the last one the list offers
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["model"], at.session_state["prompt"] = folder, PROMPT
    at.session_state["max_new_tokens"], at.session_state["strategy"] = STEPS, "greedy"
    at.switch_page("pages/step_by_step.py").run()
    for _ in range(2):                                              # to step 3
        at.button(key="sbs_next").click().run()
    at.selectbox(key="sbs_branch_token").set_value(forced)
    at.button(key="sbs_branch").click().run()
    assert not at.exception, at.exception
    at.button_group(key="strategy").set_value("sample").run()
    at.number_input(key="top_k").set_value(1).run()                # sampling from the top token only: greedy
    assert not at.exception, at.exception
    return lm, main, at


def test_what_happened_says_the_user_forced_the_unlikely_token(switched):
    _, _, at = switched
    en = texts("en", "explain")
    table = next(d.value for d in at.dataframe if en["col_step"] in d.value.columns)    # the timeline
    row = table[table[en["col_step"]] == "Step 3"]
    assert len(row) == 1, table
    why = row[en["col_why"]].iloc[0]
    assert en["why_low_prob"] not in why                            # sampling did not draw it
    assert en["why_low_prob_forced"] in why


def test_the_main_line_is_still_shown_beside_the_branch(switched):
    lm, main, at = switched
    # the main line, shown beside the branch as far as it had gone (to step 3, where the user branched), is
    # the run under the new settings: greedy's tokens here
    expected = [f"step {i + 1}: {visible(lm.token_texts[t])}" for i, t in enumerate(main[:3])]
    shown = [hover_titles(h.value) for h in at.html]
    assert expected in shown, shown
