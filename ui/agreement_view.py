"""Whole answers' agreement section: the mode, beam search, the majority of the samples and the MBR winner side
by side, probability against expected utility, the utility matrix and the groups of answers.

Everything here is worked out from the run alone (engine.answers.agreement), so a saved run shows it without
the model. The utility and the number of candidates are settings in the page's address; the run the page
saves carries them too, and a run file opened with them sets them once.
"""
from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd
import streamlit as st

from engine.answers.agreement import UTILITIES, AgreementSettings, agree
from figures.agreement import twin_bars, utility_heatmap
from figures.labels import for_markdown, visible
from ui.chart import show_figure
from ui.i18n import t
from ui.present import scroll_to_section, sized
from ui.settings import bounds, read, sync_url

_MEMO = "_wa_agreement"            # (run, utility, k, Agreement): computed once per run and settings
_FROM_FILE = "_wa_agreement_file"  # the run file whose settings were last taken


def _shown(text: str, limit: int = 80) -> str:
    if not text:
        return t("agreement.empty")
    return for_markdown(visible(text if len(text) <= limit else text[:limit - 1] + "…"))


def _share(x: float) -> str:
    return f"{x:.2e}" if 0 < x < 1e-3 else f"{x:.3f}"


def _take_file_settings(run) -> None:
    """A run file that carries agreement settings sets the widgets once, when it is opened."""
    if run.agreement is None or st.session_state.get(_FROM_FILE) is run:
        return
    st.session_state[_FROM_FILE] = run
    st.session_state["wa_mbr"] = run.agreement.utilities[0]
    st.session_state["wa_mbr_k"] = run.agreement.limit


def _computed(run, utility: str, k: int):
    memo = st.session_state.get(_MEMO)
    if memo is not None and memo[0] is run and memo[1:3] == (utility, k):
        return memo[3]
    agreement = agree(run, [utility], k)
    st.session_state[_MEMO] = (run, utility, k, agreement)
    return agreement


def agreement_section(run):
    """Draw the section; return the run carrying the settings shown, for the page's download."""
    st.subheader(t("agreement.header"), anchor="agreement")
    scroll_to_section("agreement")
    st.markdown(t("agreement.intro"))
    _take_file_settings(run)
    c1, c2 = st.columns([3, 2])
    utility = c1.radio(t("agreement.utility"), UTILITIES, key="wa_mbr", index=UTILITIES.index(read("wa_mbr")),
                       format_func=lambda u: t(f"agreement.u_{u}"), horizontal=True,
                       help=t("agreement.utility_help"))
    k = c2.slider(t("agreement.candidates"), *bounds("wa_mbr_k"), key="wa_mbr_k", value=read("wa_mbr_k"),
                  help=t("agreement.candidates_help"))
    sync_url(wa_mbr=utility, wa_mbr_k=k)
    keep = replace(run, agreement=AgreementSettings((utility,), k))
    agreement = _computed(run, utility, k)
    if not agreement.candidates:
        st.info(t("agreement.none"))
        return keep
    dist = t("answers.about_" + run.tree.settings.distribution.kind)
    _strip(run, agreement, utility, dist)
    ev = agreement.evidence
    st.markdown(t("agreement.why_range", found=_share(ev.found), rest=_share(ev.rest)))
    labels = {"p": t("agreement.p"), "expected": t("agreement.expected"), "estimate": t("agreement.estimate"),
              "lower": t("agreement.lower"), "upper": t("agreement.upper"), "empty": "∅",
              "mode": t("agreement.m_mode"), "beam": t("agreement.m_beam"),
              "majority": t("agreement.m_majority"), "mbr": t("agreement.m_mbr")}
    st.markdown(f"#### {t('agreement.twin_title')}")
    show_figure(sized(twin_bars(agreement, utility, labels)), key="wa_twin")
    st.caption(t("agreement.twin_caption"))
    st.markdown(t("agreement.notes"))
    st.markdown(f"#### {t('agreement.matrix_header')}")
    matrix_labels = {"row": t("agreement.matrix_row"), "column": t("agreement.matrix_column"),
                     "u": t("agreement.matrix_u"), "empty": "∅"}
    show_figure(sized(utility_heatmap(agreement, utility, matrix_labels)), key="wa_matrix")
    st.caption(t("agreement.matrix_caption", shown=min(len(ev.answers), 40), n=len(ev.answers)))
    _clusters(agreement)
    st.caption(t("agreement.save_note"))
    return keep


def _strip(run, agreement, utility: str, dist: str) -> None:
    """Mode, beam search, majority, MBR: four boxes side by side (stacked on a phone)."""
    boxes = st.columns(4)
    r = agreement.results[utility]
    tree = run.tree
    with boxes[0].container(border=True):
        st.markdown(f"**{t('agreement.strip_mode')}**")
        if agreement.mode is not None:
            top = agreement.candidates[agreement.mode]
            st.markdown(_shown(top.text))
            st.caption(t("agreement.strip_mode_detail", p=_share(top.prob), dist=dist,
                         sure=t("agreement.mode_sure" if agreement.mode_certified else "agreement.mode_unsure")))
    with boxes[1].container(border=True):
        st.markdown(f"**{t('agreement.strip_beam')}**")
        beam = run.landings[-1] if run.landings else None
        if beam is not None:
            who = t("answers.greedy") if beam.strategy == "greedy" else t("answers.beam_n",
                                                                          n=beam.strategy.split()[-1])
            st.markdown(_shown(beam.text))
            if beam.complete:
                rank = f"{beam.rank}" + ("" if beam.exact_rank else "?")
                st.caption(t("agreement.strip_beam_detail", who=who, p=_share(math.exp(beam.logprob)), rank=rank,
                             dist=dist))
            else:
                st.caption(t("agreement.strip_beam_open", who=who, depth=tree.settings.depth))
            if beam.strategy == "greedy":
                st.caption(t("agreement.strip_beam_none"))
    with boxes[2].container(border=True):
        m = agreement.majority
        n = run.samples.samples if run.samples is not None else 0
        st.markdown(f"**{t('agreement.strip_majority', n=n)}**")
        if m is None:
            st.caption(t("agreement.strip_majority_none"))
        else:
            st.markdown(_shown(m.answer.text))
            st.caption(t("agreement.strip_majority_detail", votes=m.votes, n=m.of, dist=dist))
    with boxes[3].container(border=True):
        st.markdown(f"**{t('agreement.strip_mbr', u=t(f'agreement.u_{utility}'))}**")
        won = agreement.candidates[r.winner]
        st.markdown(_shown(won.text))
        verdict = t("agreement.mbr_certified", k=len(agreement.candidates), margin=f"{r.margin:.3f}") \
            if r.certified else t("agreement.mbr_uncertified", margin=f"{-r.margin:.3f}")
        st.caption(t("agreement.strip_mbr_detail", low=_share(r.lower[r.winner]), high=_share(r.upper[r.winner]),
                     dist=dist, verdict=verdict))


def _clusters(agreement) -> None:
    st.markdown(f"#### {t('agreement.clusters_header')}")
    rows = []
    for c in agreement.clusters[:60]:
        rows.append({t("agreement.col_group"): visible(c.key)[:60] if c.key else "∅",
                     t("agreement.col_members"): len(c.members),
                     t("agreement.col_examples"): " · ".join(visible(a.text)[:30] for a in c.members[:3]),
                     t("agreement.col_mass"): c.mass,
                     t("agreement.col_votes"): c.votes})
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                 column_config={t("agreement.col_mass"): st.column_config.NumberColumn(format="%.3g")})
    votes = "" if math.isnan(agreement.vote_entropy) else t("agreement.vote_entropy",
                                                             h=f"{agreement.vote_entropy:.3f}")
    st.markdown(t("agreement.cluster_entropy", h=f"{agreement.cluster_entropy:.3f}",
                  found=_share(agreement.evidence.found), votes=votes))
