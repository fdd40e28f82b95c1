"""How much text this server decodes: a prompt or a reference over the limits is refused before any forward
pass, and the results of the last good one stay on screen."""
from __future__ import annotations

import streamlit as st

from engine import ConfigError
from engine.config import MAX_NEW_TOKENS
from engine.model import LoadedModel
from engine.tokens import unpaired_surrogate
from figures.labels import for_markdown
from ui.i18n import t
from ui.results import keep_or_stop
from ui.shared_model import loaded_model

PROMPT_LIMIT_BYTES = 8000   # UTF-8 bytes of prompt this server decodes: the first forward pass grows with the
                            # prompt (30 KB of English, 5,700 tokens, fits the bundled model's 8,192-token context
                            # and took 95 s on a busy 2-core machine), so a shared server stops well before that
PROMPT_LIMIT_TOKENS = 2048  # and tokens, once the model is loaded: 6,000 bytes of emoji are about 4,500 tokens


def prompt_problem(prompt: str, lm: LoadedModel | None = None, tokens: int | None = None) -> str | None:
    """Why this server will not decode `prompt` (too many bytes, or tokens once a model can count them), else
    None. tokens: the count when it is known already (a recorded trace's prompt ids)."""
    size = len(prompt.encode("utf-8", errors="surrogatepass"))
    if size > PROMPT_LIMIT_BYTES:
        return t("common.prompt_too_big", n=f"{size:,}", limit=f"{PROMPT_LIMIT_BYTES:,}")
    if tokens is None:
        tokens = 0
        if lm is not None and unpaired_surrogate(prompt) is None:      # (the engine names a lone surrogate)
            tokens = len(lm.tokenizer(prompt)["input_ids"])
    if tokens > PROMPT_LIMIT_TOKENS:
        return t("common.prompt_too_many_tokens", n=f"{tokens:,}", limit=f"{PROMPT_LIMIT_TOKENS:,}")
    return None


def prompt_within_limit(prompt: str, model: str) -> str:
    """The prompt, or the last one within the limits when this one is over them: refused here, before
    any forward pass, and the results of the last good prompt stay on screen. Bytes are counted
    first; tokens too when the model is already loaded (tokenizing takes milliseconds)."""
    problem = prompt_problem(prompt, loaded_model(model))
    if problem is None:
        st.session_state["_last_good_prompt"] = prompt
        return prompt
    previous = st.session_state.get("_last_good_prompt")
    keep_or_stop(ConfigError("prompt", problem), have_previous=previous is not None, message=for_markdown(problem))
    return previous


def reference_within_limit(reference: str, lm: LoadedModel | None = None, url_key: str = "tf_reference") -> str | None:
    """The teacher-forcing reference, or the last one within the limits when this one is over them.

    Scoring a reference is one forward pass over prompt + reference, and the free run beside it decodes
    as many tokens as the reference has: so a reference gets the prompt's byte limit, and at most the
    tokens one decode may make (MAX_NEW_TOKENS), counted with the loaded model's tokenizer when there
    is one. Refused here, before any forward pass, with the results of the last good reference kept;
    `url_key`, the reference's place in the URL, then holds no refused text."""
    size = len(reference.encode("utf-8", errors="surrogatepass"))
    problem = None
    if size > PROMPT_LIMIT_BYTES:
        problem = t("teacher.reference_too_big", n=f"{size:,}", limit=f"{PROMPT_LIMIT_BYTES:,}")
    elif lm is not None and unpaired_surrogate(reference) is None:      # (the engine names a lone surrogate)
        tokens = len(lm.tokenizer(reference, add_special_tokens=False)["input_ids"])
        if tokens > MAX_NEW_TOKENS:
            problem = t("teacher.reference_too_many_tokens", n=f"{tokens:,}", limit=f"{MAX_NEW_TOKENS:,}")
    if problem is None:
        st.session_state["_last_good_reference"] = reference
        return reference
    previous = st.session_state.get("_last_good_reference")
    st.query_params.pop(url_key, None)        # a refused text is no link to share (the page puts back a kept one)
    keep_or_stop(ConfigError("reference", problem), have_previous=previous is not None,
                 message=for_markdown(problem))
    return previous
