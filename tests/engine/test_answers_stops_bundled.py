"""Stop strings on the bundled models: each token's bytes are what the tokenizer decodes, and the Interview
card's demo on Gemma says what the tree finds (the Chinese answers end at a newline or a 。)."""
from __future__ import annotations

import math
import random

import pytest

from engine.answers import TreeSettings
from engine.answers.run import explore
from engine.answers.stops import PRESETS, token_bytes
from ui.interview_answers import CAPITALS_ZH, CARDS

pytestmark = pytest.mark.bundled


def decodes_like_the_tokenizer(lm) -> None:
    """Random token sequences with a character split into byte pieces among them: the bytes joined and decoded are
    the tokenizer's own decode (on whole UTF-8; stray bytes are shown differently by each tokenizer, and a stop
    string is searched in the bytes)."""
    table = token_bytes(lm.tokenizer, lm.facts.vocab_size)
    single = {raw: t for t, raw in reversed(list(enumerate(table))) if len(raw) == 1}
    rng = random.Random(0)
    compared = 0
    for _ in range(400):
        char = rng.choice("。巴黎，😀é\n")
        pieces = [single[bytes([b])] for b in char.encode("utf-8")]
        ids = [rng.randrange(len(lm.tokenizer)) for _ in range(rng.randrange(1, 6))]
        at = rng.randrange(len(ids) + 1)
        ids[at:at] = pieces
        joined = b"".join(table[i] for i in ids)
        try:
            text = joined.decode("utf-8")
        except UnicodeDecodeError:
            continue
        assert text == lm.tokenizer.decode(ids, skip_special_tokens=False), ids
        compared += 1
    assert compared > 300


def test_smollm2_token_bytes_are_its_decode(bundled):
    decodes_like_the_tokenizer(bundled)


@pytest.mark.gemma
def test_gemma_token_bytes_are_its_decode(gemma):
    decodes_like_the_tokenizer(gemma)


def run_card(lm, index: int):
    _, page, settings = CARDS["stop"][index]
    assert page == "answers" and settings["prompt"] == CAPITALS_ZH and settings["chat"] == "0"
    tree = TreeSettings(depth=int(settings["wa_depth"]), budget=int(settings["wa_budget"]),
                        branch=int(settings["wa_branch"]), batch=16, stops=PRESETS[settings["wa_stops"]])
    return explore(lm, settings["prompt"], tree, beams=(1, int(settings["wa_beams"])))


@pytest.mark.gemma
def test_the_stop_card_on_gemma(gemma):
    run = run_card(gemma, 0)
    tree, ledger = run.tree, run.tree.ledger
    top = tree.answers[0]
    # 'ended at a newline or a 。, the most likely answer is 巴黎 with about 87 %, the answers found hold about 91 %,
    # and greedy and beam 4 both land on it, rank 1 and certified'
    assert top.text == "巴黎" and top.stop and 0.82 < top.prob < 0.92
    assert 0.88 < ledger.answers < 0.95 and ledger.total == pytest.approx(1, abs=1e-9)
    assert tree.certified_count >= 1
    assert [(x.strategy, x.text, x.rank, x.exact_rank) for x in run.landings] == [("greedy", "巴黎", 1, True),
                                                                                   ("beam 4", "巴黎", 1, True)]
    # 'with the end token alone, complete answers worth 0.2 %, and neither greedy nor beam search ends within 8'
    alone = run_card(gemma, 1)
    assert 0.0005 < alone.tree.ledger.answers < 0.005
    assert not any(x.complete for x in alone.landings)
    assert math.isclose(alone.tree.ledger.total, 1, abs_tol=1e-9)
