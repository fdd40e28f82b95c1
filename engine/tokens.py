"""Turn a prompt into token ids the way the model expects, and check it fits."""
from __future__ import annotations

from typing import TYPE_CHECKING

from engine.errors import ConfigError

if TYPE_CHECKING:                   # the CLI checks a prompt's text before PyTorch is imported
    from engine.model import LoadedModel


def unpaired_surrogate(text: str) -> int | None:
    """Index of the first lone surrogate (U+D800..U+DFFF) in `text`, else None. Python keeps one for
    a byte that was not UTF-8 (a command-line argument) or half of an emoji's UTF-16 pair; no
    tokenizer can encode it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def encode_prompt(lm: LoadedModel, prompt: str, chat: bool = False, max_new_tokens: int = 0) -> list:
    """Token ids for the prompt (chat-wrapped if asked); raises ConfigError naming 'prompt'."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ConfigError("prompt", "prompt: is empty; type some text for the model to continue", "prompt_empty")
    bad = unpaired_surrogate(prompt)
    if bad is not None:
        raise ConfigError("prompt", f"prompt: character {bad + 1:,} is {prompt[bad]!a}, half of a UTF-16 pair "
                                    "or an undecodable byte, not text; remove it", "prompt_surrogate",
                          at=f"{bad + 1:,}", char=f"{prompt[bad]!a}")
    tokenizer = lm.tokenizer
    if chat:
        if not lm.facts.has_chat_template:
            raise ConfigError("chat", f"chat: the model {lm.name} has no chat template; turn the chat switch off",
                              "chat_no_template", model=lm.name)
        text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                             tokenize=False)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    else:
        ids = tokenizer(prompt)["input_ids"]
    if not ids:
        raise ConfigError("prompt", "prompt: gives no tokens; type some text for the model to continue",
                          "prompt_no_tokens")
    context = lm.facts.context_length
    if len(ids) >= context:
        raise ConfigError("prompt", f"prompt: is {len(ids):,} tokens, longer than the model's context of "
                                    f"{context:,} tokens; shorten it", "prompt_over_context",
                          n=f"{len(ids):,}", context=f"{context:,}")
    if len(ids) + max_new_tokens > context:
        raise ConfigError("max_new_tokens", f"max_new_tokens: the prompt ({len(ids):,} tokens) plus {max_new_tokens} "
                                            f"new tokens exceeds the model's context of {context:,}; ask for at most "
                                            f"{context - len(ids)} new tokens", "new_over_context",
                          n=f"{len(ids):,}", new=max_new_tokens, context=f"{context:,}", most=context - len(ids))
    return ids


def first_difference(a: list, b: list) -> int | None:
    """First index where two token sequences differ (the shorter one ending counts); None if identical."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))
