"""Strategy controls shared by the pages: widgets for a DecodeConfig, kept in the URL.

Widget keys are the DecodeConfig field names, so a setting chosen on one page is the
same setting on the next page and in a copied link. Hidden parameters (top-p while
greedy is selected) keep their value through the URL.
"""
from __future__ import annotations

import streamlit as st

from engine import WARPED_STRATEGIES, DecodeConfig
from ui.i18n import t
from ui.settings import bounds, read, sync_url
from ui.sidebar import SharedSettings

# every strategy parameter kept in the URL (types, defaults and ranges: ui.settings.TABLE)
PARAMS = ("strategy", "temperature", "top_k", "top_p", "min_p", "repetition_penalty", "num_beams", "length_penalty",
          "tau", "top_n")


def strategy_controls(strategies=("greedy", "sample", "beam"), container=None, samplers: bool = False) -> dict:
    """Render the strategy picker and the parameters it uses; return the values for DecodeConfig.
    samplers: also the sampler order and the engine-specific samplers (ui.samplers), kept in the URL too."""
    box = container or st
    values = {}
    strategy = read("strategy")
    if strategy not in strategies:
        strategy = strategies[0]
        st.session_state.pop("strategy", None)
    names = {s: t(f"step.strategy_{s}") for s in strategies}      # labels in this run's language
    values["strategy"] = box.segmented_control(
        t("step.strategy"), strategies, key="strategy", default=strategy,
        format_func=names.get, help=t("step.strategy_help")) or strategy
    strategy = values["strategy"]
    cols = box.columns(4)
    if strategy in WARPED_STRATEGIES:
        values["temperature"] = cols[0].slider(t("step.temperature"), *bounds("temperature"), step=0.05,
                                               key="temperature", value=read("temperature"),
                                               help=t("step.temperature_help"))
        values["top_k"] = cols[1].number_input(t("step.top_k"), *bounds("top_k"), step=1, key="top_k",
                                               value=read("top_k"), help=t("step.top_k_help"))
        values["top_p"] = cols[2].slider(t("step.top_p"), *bounds("top_p"), step=0.01, key="top_p",
                                         value=read("top_p"), help=t("step.top_p_help"))
        values["min_p"] = cols[3].slider(t("step.min_p"), *bounds("min_p"), step=0.01, key="min_p",
                                         value=read("min_p"), help=t("step.min_p_help"))
        if strategy == "gumbel":
            values["tau"] = box.slider(t("step.tau"), *bounds("tau"), step=0.05, key="tau",
                                       value=read("tau"))
    elif strategy == "beam":
        values["num_beams"] = cols[0].slider(t("step.num_beams"), *bounds("num_beams"), key="num_beams",
                                             value=read("num_beams"), help=t("step.num_beams_help"))
        values["length_penalty"] = cols[1].slider(t("step.length_penalty"), *bounds("length_penalty"), step=0.1,
                                                  key="length_penalty", value=read("length_penalty"),
                                                  help=t("step.length_penalty_help"))
    with box.expander(t("step.more_settings")):
        values["repetition_penalty"] = st.slider(t("step.repetition_penalty"), *bounds("repetition_penalty"), step=0.05,
                                                 key="repetition_penalty",
                                                 value=read("repetition_penalty"),
                                                 help=t("step.repetition_penalty_help"))
        values["top_n"] = st.slider(t("step.top_n"), *bounds("top_n"), key="top_n", value=read("top_n"),
                                    help=t("step.top_n_help"))
    # hidden parameters keep their URL value, so switching back restores them; a value no control
    # would allow (num_beams=-3 while greedy is shown) is held inside the control's range, as if shown
    for key in PARAMS:
        if key not in values:
            values[key] = read(key)
    sync_url(**{k: values[k] for k in PARAMS})
    if samplers:
        from ui.samplers import PARAMS as SAMPLER_PARAMS, sampler_controls

        values.update(sampler_controls(box))
        sync_url(**{k: values[k] for k in SAMPLER_PARAMS})
    return values


def make_config(settings: SharedSettings, values: dict, **overrides) -> DecodeConfig:
    """A DecodeConfig from the shared sidebar settings and the strategy values."""
    fields = {k: values[k] for k in PARAMS if k in values}
    if "sampler_order" in values:
        from ui.samplers import config_fields

        fields.update(config_fields(values))
    fields.update(seed=settings.seed, max_new_tokens=settings.max_new_tokens, chat=settings.chat)
    fields.update(overrides)
    if fields.get("strategy") == "beam":
        fields["num_return_sequences"] = min(fields.get("num_return_sequences", 1), fields.get("num_beams", 4))
    return DecodeConfig(**fields)


def shaping_words(config: DecodeConfig) -> str:
    """'temperature 0.7, top-p 0.9' in the current language, or '' when nothing shapes the distribution."""
    parts = []
    if config.mirostat and config.strategy in WARPED_STRATEGIES and config.sampler_order == "llama.cpp":
        # llama.cpp's mirostat chain is temperature -> mirostat: no other stage runs, so none is named
        if config.temperature != 1.0:
            parts.append(t("step.word_temperature", value=f"{config.temperature:g}"))
        return ", ".join([*parts, t("samplers.word_mirostat_chain", value=config.mirostat)])
    if config.strategy in WARPED_STRATEGIES:
        if config.temperature != 1.0:
            parts.append(t("step.word_temperature", value=f"{config.temperature:g}"))
        if config.top_k:
            parts.append(t("step.word_top_k", value=config.top_k))
        if config.top_p < 1.0:
            parts.append(t("step.word_top_p", value=f"{config.top_p:g}"))
        if config.min_p > 0:
            parts.append(t("step.word_min_p", value=f"{config.min_p:g}"))
    if config.repetition_penalty != 1.0:
        parts.append(t("step.word_repetition", value=f"{config.repetition_penalty:g}"))
    neutral = DecodeConfig()
    for name in SAMPLER_WORDS:              # the engine-specific samplers that are on
        if getattr(config, name) != getattr(neutral, name):
            parts.append(t(f"samplers.word_{name}", value=f"{getattr(config, name):g}"))
    return ", ".join(parts)


SAMPLER_WORDS = ("presence_penalty", "frequency_penalty", "no_repeat_ngram_size", "dry_multiplier", "top_n_sigma",
                 "typical_p", "xtc_probability", "dynatemp_range", "top_h", "epsilon_cutoff", "eta_cutoff", "mirostat")


def step_caption(step, config: DecodeConfig, forced_token: int | None = None) -> str:
    """One sentence (Markdown-safe) saying what the strategy did at this step."""
    from figures.labels import for_markdown, visible

    chosen = step.chosen
    token = for_markdown(visible(step.chosen_texts[0]))
    rank = chosen.rank if chosen else "?"
    # one format on the page: a probability (or a share of it) to 4 decimals, as the chart's hover and the
    # stage table give it
    prob = f"{chosen.prob:.4f}" if chosen else "?"
    shaped = f"{chosen.shaped_prob:.4f}" if chosen else "?"
    if forced_token is not None:
        return t("step.caption_forced", token=token, rank=rank, prob=prob)
    if config.strategy == "greedy":
        return t("step.caption_greedy", token=token, rank=rank, prob=prob)
    if config.strategy == "beam":
        return t("step.caption_beam", beams=config.num_beams, token=token, rank=rank, prob=prob)
    words = shaping_words(config)
    covered = f"{1.0 - step.removed_mass:.4f}"
    if config.strategy == "sample":
        if words:
            return t("step.caption_sample_shaped", shaping=for_markdown(words), kept=f"{step.kept_count:,}",
                     mass=covered, token=token, rank=rank, prob=prob, shaped=shaped)
        return t("step.caption_sample", kept=f"{step.kept_count:,}", token=token, rank=rank, prob=prob)
    return t("step.caption_soft", kept=f"{step.kept_count:,}", mass=covered, token=token)
