"""A saved Whole answers run on the page: its own prompt, chat flag and settings, and which settings are live.

A file opens without the model: the page shows the file's tree, while the sidebar and the controls above
keep the live settings, which apply again once the file is removed. So the file's own settings are shown
beside the run, and each live one that differs is named.
"""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from ui.answers_notes import literal
from ui.i18n import t

SHOWN_PROMPT = 2_000       # characters of a file's prompt shown (the rest is counted)


@dataclass(frozen=True)
class RunSettings:
    """What a run was made with, in the page's own terms (the live ones and a file's, side by side)."""
    prompt: str
    chat: bool
    seed: int
    depth: int
    budget: int
    branch: int
    samples: int
    distribution: str          # a sentence: "temperature 1, nothing cut" or the sampler's settings
    beams: str                 # "4, 8", or "–" when none was placed


def distribution_words(dist) -> str:
    if dist.kind == "model":
        return t("answers.detail_model")
    words = t("answers.detail_sampler", temperature=f"{dist.temperature:g}", top_p=f"{dist.top_p:g}")
    if dist.top_k:
        words += f", top-k {dist.top_k}"
    if dist.min_p:
        words += f", min-p {dist.min_p:g}"
    if dist.repetition_penalty != 1:
        words += f", {t('answers_run.repetition_penalty')} {dist.repetition_penalty:g}"
    return words


def file_settings(run) -> RunSettings:
    """A file's run as RunSettings: its beams are the widths it placed (none for a stopped run)."""
    s = run.tree.settings
    widths = [x.strategy.split()[-1] for x in run.landings if x.strategy != "greedy"]
    return RunSettings(prompt=run.prompt, chat=run.chat, seed=run.seed, depth=s.depth, budget=s.budget,
                       branch=s.branch, samples=run.samples.samples if run.samples is not None else 0,
                       distribution=distribution_words(s.distribution), beams=", ".join(widths) or "–")


def live_settings(prompt: str, chat: bool, seed: int, tree_settings, samples: int, widths) -> RunSettings:
    return RunSettings(prompt=prompt, chat=chat, seed=seed, depth=tree_settings.depth, budget=tree_settings.budget,
                       branch=tree_settings.branch, samples=samples,
                       distribution=distribution_words(tree_settings.distribution),
                       beams=", ".join(str(w) for w in widths) or "–")


_NAMES = {"prompt": "common.prompt", "chat": "common.chat", "seed": "common.seed", "depth": "answers.depth",
          "budget": "answers.budget", "branch": "answers.branch", "samples": "answers.samples",
          "distribution": "answers.distribution", "beams": "answers.beams"}


def differences(saved: RunSettings, live: RunSettings) -> list:
    """The names (in the page's language) of the live settings that differ from the file's."""
    return [t(_NAMES[field]) for field in _NAMES if getattr(saved, field) != getattr(live, field)]


def show_saved_run(run, live: RunSettings) -> None:
    """The file's model, prompt, chat flag and settings, then which settings on screen are live."""
    saved = file_settings(run)
    with st.container(border=True):
        st.markdown(t("answers_run.file_header", model=literal(run.model)))
        shown = saved.prompt if len(saved.prompt) <= SHOWN_PROMPT else saved.prompt[:SHOWN_PROMPT] + " …"
        st.caption(t("answers_run.file_prompt", n=f"{len(saved.prompt):,}"))
        st.code(shown, language=None, wrap_lines=True)
        st.markdown(t("answers_run.file_settings", chat=t("answers_run.on" if saved.chat else "answers_run.off"),
                      depth=saved.depth, budget=f"{saved.budget:,}", branch=saved.branch, samples=saved.samples,
                      seed=saved.seed, distribution=saved.distribution, beams=saved.beams))
        changed = differences(saved, live)
        st.caption(t("answers_run.live_differs", names=", ".join(changed)) if changed else
                   t("answers_run.live_same"))
