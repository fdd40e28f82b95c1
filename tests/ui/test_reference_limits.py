"""The Teacher forcing page's reference is bounded like the prompt: a reference over the byte or token
limit is refused before any forward pass (a hook on the loaded model counts them), the results on
screen stay, and a reference too long for a link stays out of the address. A message from a failed
sampled reference is shown literally.

Pages run on the tiny random Llama (saved to a folder); its context is 256 tokens, so the limits are
lowered in the tests where a reference under the context must still be refused by them.
"""
from __future__ import annotations

import re

import pytest

import ui.limits
import ui.shared_model
from app_helpers import MARKDOWN_NAME, PROMPT, on_screen, open_with, unescaped

REFERENCE = " Paris. It is a big city."


@pytest.fixture
def passes(tiny_llama_folder, monkeypatch):
    """Forward passes of the app's shared tiny Llama, counted by a hook from `attach()` on; and every
    reference the engine tokenized."""
    import engine.inside.teacher

    _, folder = tiny_llama_folder
    ui.shared_model._models.clear()
    count = {"forward": 0, "references": []}
    real_encode = engine.inside.teacher.encode_reference

    def encode(lm, reference):
        count["references"].append(reference)
        return real_encode(lm, reference)

    def hook(*_):
        count["forward"] += 1

    handles = []

    def attach():
        model = ui.shared_model._models()[ui.shared_model.model_key(folder)].model
        handles.append(model.register_forward_hook(hook))

    monkeypatch.setattr(engine.inside.teacher, "encode_reference", encode)
    count["attach"] = attach
    yield count
    for handle in handles:
        handle.remove()
    ui.shared_model._models.clear()


def reference_in_url(at) -> str | None:
    value = at.query_params.get("tf_reference")
    return value[0] if isinstance(value, list) else value


def test_a_typed_reference_over_the_byte_limit_is_refused_before_any_forward_pass(tiny_llama_folder, passes,
                                                                                   monkeypatch):
    _, folder = tiny_llama_folder
    monkeypatch.setattr(ui.limits, "PROMPT_LIMIT_BYTES", 300)        # 180 tokens fit the tiny context of 256
    at = open_with("teacher_forcing", state={"model": folder, "prompt": PROMPT, "max_new_tokens": 4,
                                       "tf_reference": REFERENCE})
    assert not at.error, [e.value for e in at.error]
    before = on_screen(at)
    assert before[2] > 0 and reference_in_url(at) == REFERENCE
    passes["attach"]()

    long = " Paris is a big city." * 17                               # 357 bytes
    at.text_area(key="tf_reference").set_value(long).run()
    assert not at.exception, at.exception
    messages = [unescaped(e.value) for e in at.error]
    assert len(messages) == 1 and "reference: is 357 bytes" in messages[0] and "300 bytes" in messages[0], messages
    assert passes["forward"] == 0, "the model ran on a reference over the limit"
    assert long not in passes["references"]
    assert on_screen(at) == before
    assert any("last ones that worked" in c.value for c in at.caption)
    assert reference_in_url(at) == REFERENCE          # the link still reproduces what is on screen

    at.text_area(key="tf_reference").set_value(" Paris.").run()        # a good one is scored again
    assert not at.error, [e.value for e in at.error]
    assert passes["forward"] > 0 and reference_in_url(at) == " Paris."


def test_a_linked_reference_of_30_kb_is_refused_and_left_out_of_the_address(tiny_llama_folder, passes):
    _, folder = tiny_llama_folder
    big = "A language model predicts the next token. 你好 😀 " * 600          # 30,600 bytes
    at = open_with("teacher_forcing", params={"tf_reference": big},
             state={"model": folder, "prompt": PROMPT, "max_new_tokens": 4})
    messages = [unescaped(e.value) for e in at.error]
    assert len(messages) == 1 and f"reference: is {len(big.encode()):,} bytes" in messages[0], messages
    assert "8,000" in messages[0]
    assert big not in passes["references"] and not at.metric, "the page scored a reference over the limit"
    assert reference_in_url(at) is None


def test_a_reference_over_the_token_limit_is_refused_before_any_forward_pass(tiny_llama_folder, passes,
                                                                            monkeypatch):
    """The free run decodes as many tokens as the reference has: at most what one decode may make."""
    lm, folder = tiny_llama_folder
    monkeypatch.setattr(ui.limits, "MAX_NEW_TOKENS", 100)
    at = open_with("teacher_forcing", state={"model": folder, "prompt": PROMPT, "max_new_tokens": 4,
                                       "tf_reference": REFERENCE})
    before = on_screen(at)
    passes["attach"]()
    emoji = "😀🍕" * 18                                 # 144 bytes, a byte token each: over 100, under 256
    tokens = len(lm.tokenizer(emoji, add_special_tokens=False)["input_ids"])
    assert 100 < tokens < 256 - 10
    at.text_area(key="tf_reference").set_value(emoji).run()
    messages = [unescaped(e.value) for e in at.error]
    assert len(messages) == 1 and f"reference: is {tokens:,} tokens" in messages[0] and "100 tokens" in messages[0]
    assert passes["forward"] == 0 and emoji not in passes["references"]
    assert on_screen(at) == before


def test_the_token_limit_is_what_one_decode_may_make(tiny_llama_folder, passes):
    """1,200 emoji bytes are 1,200 tokens: more than the 1,024 one decode makes, refused by that limit (the tiny
    model's context would refuse it too, later and with another message)."""
    _, folder = tiny_llama_folder
    emoji = "😀" * 300
    at = open_with("teacher_forcing", params={"tf_reference": emoji},
             state={"model": folder, "prompt": PROMPT, "max_new_tokens": 4})
    messages = [unescaped(e.value) for e in at.error]
    assert messages == ["reference: is 1,200 tokens, more than the 1,024 tokens this server scores (the free run "
                        "beside it decodes as many tokens as the reference has, and one decode makes at most "
                        "1,024); shorten it"], messages
    assert emoji not in passes["references"]


def test_a_failed_sampled_reference_naming_a_markdown_model_is_shown_literally(tiny_llama_folder, monkeypatch):
    """The reference belongs to another prompt; "use a sampled continuation" fails with a message that
    names the model: its brackets and '!' stay text, never a link or an image."""
    from engine import DecodeScopeError
    from engine.service import shared_service

    _, folder = tiny_llama_folder
    at = open_with("teacher_forcing", params={"tf_for": "0123456789"},
             state={"model": folder, "prompt": PROMPT, "max_new_tokens": 4, "tf_reference": REFERENCE})
    service = shared_service()

    def fail(*_args, **_kwargs):
        raise DecodeScopeError(f"model {MARKDOWN_NAME}: could not decode")

    monkeypatch.setattr(service, "decode", fail)
    at.button(key="tf_use_sampled").click().run()
    assert not at.exception, at.exception
    messages = [e.value for e in at.error]
    assert len(messages) == 1, messages
    assert MARKDOWN_NAME in unescaped(messages[0])
    assert not re.search(r"(?<!\\)[\[\]()!<>]", messages[0]), messages[0]
