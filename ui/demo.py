"""The demo a page opens with when neither the session nor the link names one: the prompt, the model and the
teacher-forcing reference, in the reader's language."""
from __future__ import annotations

from ui.i18n import language
from ui.shared_model import offers

DEFAULT_PROMPT = "The capital of France is"
ZH_DEMO_PROMPT = "中国的首都是"
# Each demo prompt's teacher-forcing reference, in its own language, written by hand so that it parts from
# what the bundled model writes greedily: a reference the model reproduces shows no exposure bias at all.
DEMO_REFERENCES = {
    DEFAULT_PROMPT: (" Paris. It is the largest city in the country and sits on the river Seine. Visitors come "
                     "for the Eiffel Tower, the Louvre and the food."),
    ZH_DEMO_PROMPT: "北京。这座古城已有三千多年的历史，秋天是游览故宫和长城最好的季节。",
}


def demo_language_settings() -> dict:
    """What a demo link changes for the reader's language: with the Chinese interface, a Chinese
    prompt on the bundled model that writes Chinese (SmolLM2 answers Chinese with noise), where
    this server offers it."""
    from engine.model import GEMMA3

    if language() == "zh" and offers(GEMMA3.key):
        return {"prompt": ZH_DEMO_PROMPT, "model": GEMMA3.key}
    return {}


def landing_prompt() -> str:
    """The prompt a page opens with when neither the session nor the link names one: the demo prompt
    of the reader's language (a Chinese reader is not greeted with an English sentence)."""
    return demo_language_settings().get("prompt", DEFAULT_PROMPT)


def landing_model() -> str:
    """What the Model box holds when neither the session nor the link names a model: empty (the bundled
    SmolLM2), or for a Chinese reader the bundled model that writes Chinese, where this server offers it."""
    return demo_language_settings().get("model", "")


def demo_reference(prompt: str) -> str:
    """The teacher-forcing reference a page opens with: the prompt's own when it is a demo prompt, else the
    one written for the landing prompt (the page then asks before scoring it after another prompt)."""
    return DEMO_REFERENCES.get(prompt) or DEMO_REFERENCES[landing_prompt()]
