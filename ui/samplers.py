"""Step by step's sampler order and advanced samplers: whose chain shapes the distribution, and the settings only
some engines have, grouped by stage. Only the chosen order's settings are shown and used; the others keep their
address values (a link reproduces them), as the strategy controls keep a hidden top-p.

Widget keys are DecodeConfig field names, and every setting is in ui.settings.TABLE (type, default, range).
"""
from __future__ import annotations

import streamlit as st

from engine.config import LLAMA_CPP_SAMPLERS, SAMPLER_ORDERS
from engine.cli.samplers import engines_of
from ui.i18n import t
from ui.settings import TABLE, bounds, read

# the stages' settings, in the order llama.cpp's chain (then transformers') applies them
GROUPS = (
    ("penalties", ("presence_penalty", "frequency_penalty", "penalty_last_n")),
    ("ngram", ("no_repeat_ngram_size",)),
    ("dry", ("dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers")),
    ("top_n_sigma", ("top_n_sigma",)),
    ("typical", ("typical_p",)),
    ("xtc", ("xtc_probability", "xtc_threshold")),
    ("dynatemp", ("dynatemp_range", "dynatemp_exponent")),
    ("top_h", ("top_h",)),
    ("epsilon_eta", ("epsilon_cutoff", "eta_cutoff")),
    ("mirostat", ("mirostat", "mirostat_tau", "mirostat_eta")),
    ("samplers", ("samplers",)),
)
PARAMS = ("sampler_order", *(name for _, names in GROUPS for name in names))
STEPS = {"epsilon_cutoff": 0.0001, "eta_cutoff": 0.0001, "typical_p": 0.01, "top_h": 0.01, "xtc_probability": 0.05,
         "xtc_threshold": 0.01, "mirostat_eta": 0.01}
FORMATS = {"epsilon_cutoff": "%.4f", "eta_cutoff": "%.4f"}


def order_has(order: str, name: str) -> bool:
    """Whether the `order`'s engine has the setting `name` (a setting every engine has: yes)."""
    engines = engines_of(name)
    return not engines or order in engines


def order_slug(order: str) -> str:
    return order.replace(".", "_")


def sampler_controls(box=None) -> dict:
    """The order picker and the chosen order's engine-specific samplers, in one expander; returns every sampler
    setting (the hidden ones at their address values) for DecodeConfig via `config_fields`."""
    box = box or st
    values = {}
    with box.expander(t("samplers.title"), icon="🎛️"):
        order = read("sampler_order")
        values["sampler_order"] = st.segmented_control(
            t("samplers.order"), SAMPLER_ORDERS, key="sampler_order", default=order,
            format_func=lambda o: t(f"pipeline.order_{order_slug(o)}"), help=t("samplers.order_help")) or order
        order = values["sampler_order"]
        st.caption(t(f"samplers.order_{order_slug(order)}"))
        groups = [(group, [n for n in names if order_has(order, n)]) for group, names in GROUPS]
        groups = [(group, names) for group, names in groups if names]
        if not groups:
            st.caption(t("samplers.none"))
        for group, names in groups:
            st.markdown(f"**{t(f'samplers.group_{group}')}**")
            cols = st.columns(3)
            for i, name in enumerate(names):
                values[name] = _widget(cols[i % 3], name)
    for name in PARAMS:
        if name not in values:
            values[name] = read(name)
    return values


def _widget(column, name: str):
    """One setting's widget, its range from the table, its label and help from the texts."""
    label, help_text = t(f"samplers.{name}"), t(f"samplers.{name}_help")
    setting = TABLE[name]
    if name == "mirostat":
        return column.radio(label, setting.choices, key=name, index=setting.choices.index(read(name)),
                            horizontal=True, help=help_text,
                            format_func=lambda v: t("samplers.mirostat_off") if v == 0 else f"v{v}")
    if setting.kind is str:
        placeholder = ";".join(LLAMA_CPP_SAMPLERS) if name == "samplers" else None
        return column.text_input(label, key=name, value=read(name), help=help_text, placeholder=placeholder)
    if setting.kind is int:
        return column.number_input(label, *bounds(name), step=1, key=name, value=read(name), help=help_text)
    return column.number_input(label, *bounds(name), step=STEPS.get(name, 0.05), key=name, value=read(name),
                               format=FORMATS.get(name, "%.2f"), help=help_text)


def config_fields(values: dict) -> dict:
    """The sampler settings a DecodeConfig takes: the chosen order, and those of its settings the order has (the
    rest stay at their neutral values, so a setting kept in the address for another order is not refused)."""
    order = values.get("sampler_order", TABLE["sampler_order"].default)
    return {name: values[name] for name in PARAMS if name in values and order_has(order, name)}
