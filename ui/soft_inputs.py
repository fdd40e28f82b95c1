"""Expected embedding's section on 2025's feed-back rules: lanes on one prompt and seed, their measures, probes,
scores and cost (engine.soft_inputs), with what a small model cannot show said first.

Lanes run together (one batched forward pass per step), each streamed as it grows; Stop keeps what ran. Every
setting is in the page's address; the probes run on demand at the chosen step.
"""
from __future__ import annotations

import math

import streamlit as st

from engine import DecodeConfig, DecodeScopeError, LoadedModel
from engine.soft_inputs.lanes import SoftLanes
from engine.soft_inputs.probes import probe
from engine.soft_inputs.scores import emitted_ids, score
from engine.tokens import first_difference
from figures.labels import for_markdown, one_line, visible
from figures.soft_inputs import measure_grid, probe_bars
from ui.chart import show_figure
from ui.export import export_bar
from ui.i18n import t
from ui.present import scroll_to_section, sized
from ui.progress import held, stopped_note, watched_steps
from ui.results import keep_or_stop
from ui.settings import SI_BETAS, SI_COLD_TAUS, SI_GUMBELS, SI_LANES, bounds, read, sync_url

S = st.session_state
CHAIN = dict(top_k=30, top_p=0.95, min_p=0.001)       # Soft Thinking's published chain (after the temperature)
SHOWN_TOKENS = 3                                        # fed and nearest tokens per lane in the step table


def _controls() -> dict:
    """The section's settings, read from and written to the address."""
    if "si_lanes" not in S:
        S["si_lanes"] = read("si_lanes")
    values = {"lanes": st.multiselect(t("soft_inputs.lanes"), SI_LANES, key="si_lanes",
                                      format_func=lambda x: t(f"soft_inputs.opt_{x}"),
                                      help=t("soft_inputs.lanes_help"))}
    c = st.columns(4)
    values["k"] = c[0].slider(t("soft_inputs.k"), *bounds("si_k"), key="si_k", value=read("si_k"),
                              help=t("soft_inputs.k_help"))
    values["cold_tau"] = c[1].select_slider(t("soft_inputs.cold_tau"), SI_COLD_TAUS, value=read("si_cold_tau"),
                                            key="si_cold_tau", help=t("soft_inputs.cold_tau_help"),
                                            format_func=lambda v: t("soft_inputs.off") if v == 0 else f"{v:g}")
    values["cold_l"] = c[2].slider(t("soft_inputs.cold_l"), *bounds("si_cold_l"), key="si_cold_l",
                                   value=read("si_cold_l"), help=t("soft_inputs.cold_l_help"))
    values["gumbel"] = c[3].select_slider(t("soft_inputs.gumbel"), SI_GUMBELS, value=read("si_gumbel"),
                                          key="si_gumbel", help=t("soft_inputs.gumbel_help"),
                                          format_func=lambda v: t("soft_inputs.off") if v == 0 else f"{v:g}")
    c = st.columns(3)
    values["beta"] = c[0].select_slider(t("soft_inputs.beta"), SI_BETAS, value=read("si_beta"), key="si_beta",
                                        help=t("soft_inputs.beta_help"),
                                        format_func=lambda v: "∞" if v == "inf" else v)
    values["mtm_k"] = c[1].slider(t("soft_inputs.mtm_k"), *bounds("si_mtm_k"), key="si_mtm_k",
                                  value=read("si_mtm_k"), help=t("soft_inputs.mtm_k_help"))
    values["chain"] = c[2].toggle(t("soft_inputs.chain"), value=read("si_chain"), key="si_chain",
                                  help=t("soft_inputs.chain_help"))
    sync_url(si_lanes=",".join(values["lanes"]), si_k=values["k"], si_cold_tau=values["cold_tau"],
             si_cold_l=values["cold_l"], si_gumbel=values["gumbel"], si_beta=values["beta"],
             si_mtm_k=values["mtm_k"], si_chain=values["chain"])
    return values


def lane_configs(lm: LoadedModel, base: DecodeConfig, values: dict) -> dict:
    """lane key -> its DecodeConfig: greedy always (the reference), then the chosen lanes in the table's order."""
    chain = CHAIN if values["chain"] else {}
    cold = f"{values['cold_tau']:g}:{values['cold_l']}" if values["cold_tau"] > 0 else ""
    settings = {
        "greedy": dict(strategy="greedy"),
        "pte": dict(strategy="soft-thinking", soft_top_k=lm.facts.vocab_size),    # no truncation: p^T E
        "soft-thinking": dict(strategy="soft-thinking", soft_top_k=values["k"], cold_stop=cold,
                              soft_gumbel=float(values["gumbel"]), **chain),
        "mixture-of-inputs": dict(strategy="mixture-of-inputs", moi_beta=float(values["beta"]), **chain),
        "hidden-state": dict(strategy="hidden-state"),
        "multi-token-mean": dict(strategy="multi-token-mean", mtm_k=values["mtm_k"], **chain),
    }
    chosen = ["greedy"] + [lane for lane in SI_LANES if lane in values["lanes"]]
    return {lane: base.replace(**settings[lane]) for lane in chosen}


def lane_name(lane: str, values: dict) -> str:
    name = t(f"soft_inputs.lane_{lane}", k=values["k"], beta="∞" if values["beta"] == "inf" else values["beta"],
             K=values["mtm_k"])
    if lane == "soft-thinking" and values["gumbel"] > 0:
        name += t("soft_inputs.gumbel_suffix", tau=f"{values['gumbel']:g}")
    return name


def _run(lm: LoadedModel, prompt: str, configs: dict, names: dict) -> list:
    """[(lane, name, LaneRun)], kept per session for these settings; after Stop the steps so far; after bad input
    the last lanes that ran, as they were."""
    identity = (lm.name, lm.facts, prompt, tuple(configs.values()))
    kept = S.get("si_runs")
    if kept is not None and kept[0] == identity and not held("si_lanes"):
        return kept[1]
    complete = []

    def run(on_step, on_wait):
        lanes = SoftLanes(lm, prompt, list(configs.values()))
        lanes.run(on_step)
        complete.append(lanes.finished)
        return lanes.results(), lanes.finished

    try:
        runs = watched_steps("si_lanes", (identity,), [names[k] for k in configs],
                             [c.max_new_tokens for c in configs.values()], run)
    except DecodeScopeError as exc:      # named once (the page's own lanes may name it first); the last runs stay
        keep_or_stop(exc, have_previous=kept is not None)
        return kept[1]
    lanes = [(lane, names[lane], run) for lane, run in zip(configs, runs)]
    if complete and complete[0]:
        S["si_runs"] = (identity, lanes)
    return lanes


def _lane_texts(lm: LoadedModel, lanes: list, departures: dict) -> None:
    """Each lane's emitted text, where it leaves greedy, where Cold Stop fired; then the KV rows."""
    for key, name, run in lanes:
        text = one_line(lm.tokenizer.decode(emitted_ids(run.trace), skip_special_tokens=True))
        if key == "greedy":
            where = t("soft_inputs.is_reference")
        elif departures[name] is None:
            where = t("soft_inputs.same")
        else:
            where = t("soft_inputs.departs", step=departures[name] + 1)
        fired = next((s.index for s in run.trace.steps if s.fed is not None and s.fed.cold_stop), None)
        if fired is not None:
            where += " · " + t("soft_inputs.cold_fired", step=fired + 1)
        st.markdown(f"**{for_markdown(name)}** · {where}  \n{text}")
    prompt = len(lanes[0][2].trace.prompt_token_ids)
    if all(s.kv.rows == prompt + s.index for _, _, run in lanes for s in run.trace.steps):
        steps = max(len(run.trace.steps) for _, _, run in lanes)
        st.caption(t("soft_inputs.kv_note", prompt=prompt, steps=steps, rows=prompt + steps - 1))


def _step_table(lanes: list, index: int) -> None:
    """At one step, per lane: the emitted token, the heaviest fed tokens, the nearest tokens, the measures."""
    table = []
    for _, name, run in lanes:
        if index >= len(run.trace.steps) or run.trace.steps[index].fed is None:
            continue
        step = run.trace.steps[index]
        fed = step.fed
        texts = {c.token_id: c.text for c in step.candidates}
        mixed = ", ".join(f"{visible(texts.get(i, f'#{i}'))} {w:.2f}"
                          for i, w in zip(step.fed_ids[:SHOWN_TOKENS], step.fed_weights[:SHOWN_TOKENS]))
        table.append({t("soft_inputs.col_lane"): name, t("soft_inputs.col_emitted"): visible(step.chosen_texts[0]),
                      t("soft_inputs.col_fed"): mixed or t("soft_inputs.hidden_fed"),
                      t("soft_inputs.col_nearest"): ", ".join(f"{visible(n.text)} {n.value:.2f}"
                                                              for n in fed.nearest[:SHOWN_TOKENS]),
                      t("soft_inputs.col_cosine"): round(fed.emitted_cosine, 3),
                      t("soft_inputs.col_norm"): round(fed.norm / fed.emitted_norm, 3) if fed.emitted_norm else None,
                      t("soft_inputs.col_pr"): None if math.isnan(fed.participation) else round(fed.participation, 2)})
    if table:
        st.dataframe(table, hide_index=True, width="stretch")


def _identity(lanes: list) -> tuple:
    """What the lanes on screen are: their settings and how far each ran (Stop keeps shorter ones)."""
    return tuple((run.trace.config, len(run.trace.steps)) for _, _, run in lanes)


def _probes(lm: LoadedModel, lanes: list, index: int) -> None:
    """The two probes at one step for every lane that fed a vector (on demand: 1 + k forward rows each)."""
    key = (lm.name, lanes[0][2].trace.prompt, _identity(lanes), index)
    if S.get("si_probe_result", (None,))[0] != key:
        rows = []
        with st.spinner(t("soft_inputs.probe_running")):
            for lane, name, run in lanes:
                if lane != "greedy" and index < len(run.trace.steps):
                    rows.append((name, probe(lm, run.trace, run.vectors, index)))
        S["si_probe_result"] = (key, rows)
    rows = S["si_probe_result"][1]
    if not rows:
        return
    labels = {k: t(f"soft_inputs.p_{k}") for k in ("js_top1", "js_top2", "gap", "js")}
    labels["title"] = t("soft_inputs.probes_title", step=index + 1)
    show_figure(sized(probe_bars(rows, labels)), key="si_probe_chart")
    st.dataframe([{t("soft_inputs.col_lane"): name, t("soft_inputs.col_top1"): visible(p.top1.text),
                   t("soft_inputs.col_top2"): visible(p.top2.text),
                   labels["js_top1"]: round(p.js_top1, 4), labels["js_top2"]: round(p.js_top2, 4),
                   labels["gap"]: None if p.gap is None else round(p.gap, 4),
                   t("soft_inputs.col_after"): ", ".join(f"{visible(n.text)} {n.value:.2f}" for n in p.after_fed[:3])}
                  for name, p in rows], hide_index=True, width="stretch")
    st.caption(t("soft_inputs.probe_caption"))


def _scores(lm: LoadedModel, lanes: list, values: dict) -> None:
    key = (lm.name, lanes[0][2].trace.prompt, _identity(lanes))
    if S.get("si_score_result", (None,))[0] != key:
        S["si_score_result"] = (key, [(name, score(lm, run.trace)) for _, name, run in lanes if run.trace.steps])
    table = []
    for name, s in S["si_score_result"][1]:
        table.append({t("soft_inputs.col_lane"): name, t("soft_inputs.col_tokens"): s.tokens,
                      t("soft_inputs.col_ppl"): round(s.perplexity, 2),
                      t("soft_inputs.col_distinct"): None if math.isnan(s.distinct2) else round(s.distinct2, 3),
                      t("soft_inputs.col_repeat"): f"{s.repeat_length} · {visible(s.repeat_text)}"
                      if s.repeat_length else "0",
                      t("soft_inputs.col_macs"): f"{s.multiply_adds:,}",
                      t("soft_inputs.col_rule_time"): None if math.isnan(s.rule_seconds)
                      else round(s.rule_seconds * 1e3, 3),
                      t("soft_inputs.col_step_time"): round(s.step_seconds * 1e3, 1)
                      if not math.isnan(s.step_seconds) else None})
    st.dataframe(table, hide_index=True, width="stretch")
    V, d = lm.facts.vocab_size, lm.facts.hidden_size
    st.caption(t("soft_inputs.scores_caption"))
    st.markdown(t("soft_inputs.cost_text", model=for_markdown(lm.name), vocab=f"{V:,}", hidden=f"{d:,}",
                  vd=f"{V * d:,}", k=values["k"], kd=f"{min(values['k'], V) * d:,}"))


def soft_inputs_section(lm: LoadedModel, settings, temperature: float) -> None:
    """The whole section, under the page's own lanes; `temperature`: the page's (every sampled lane uses it)."""
    st.subheader(t("soft_inputs.header"), anchor="soft-inputs")
    scroll_to_section("soft-inputs")
    st.info(t("soft_inputs.caveat"), icon="📏")
    st.markdown(t("soft_inputs.intro", temperature=f"{temperature:g}"))
    values = _controls()
    base = DecodeConfig(max_new_tokens=settings.max_new_tokens, seed=settings.seed, chat=settings.chat,
                        temperature=temperature, top_n=10)
    try:
        configs = lane_configs(lm, base, values)
        for config in configs.values():
            config.validate(lm.facts.vocab_size)
    except DecodeScopeError as exc:
        keep_or_stop(exc, have_previous=False)
        return
    names = {lane: lane_name(lane, values) for lane in configs}
    lanes = _run(lm, settings.prompt, configs, names)
    stopped_note("si_lanes")
    greedy_ids = emitted_ids(lanes[0][2].trace)
    departures = {name: first_difference(greedy_ids, emitted_ids(run.trace)) for _, name, run in lanes}

    st.markdown(f"#### {t('soft_inputs.lanes_header')}")
    _lane_texts(lm, lanes, departures)

    longest = max((len(run.trace.steps) for _, _, run in lanes), default=0)
    if longest == 0:
        return
    index = 0
    if "si_step" not in S or S["si_step"] > longest:
        S["si_step"] = min(read("si_step"), longest)
    if longest > 1:
        index = st.slider(t("soft_inputs.step"), 1, longest, key="si_step", help=t("soft_inputs.step_help")) - 1
    sync_url(si_step=index + 1)
    st.markdown(f"#### {t('soft_inputs.measures_header')}")
    labels = {m: t(f"soft_inputs.m_{m}") for m in ("cosine", "norm_ratio", "participation", "entropy", "step",
                                                     "departure", "cold_stop")}
    labels["title"] = t("soft_inputs.measures_title")
    measured = [(name, run.trace) for lane, name, run in lanes if lane != "greedy"]
    cold = values["cold_tau"] if any(lane == "soft-thinking" for lane, _, _ in lanes) and values["cold_tau"] > 0 \
        else None
    fig = measure_grid(measured, labels, departures, cold_stop=cold, selected=index)
    show_figure(sized(fig), key="si_measures_chart")
    st.caption(t("soft_inputs.measures_caption"))
    _step_table(lanes, index)

    st.markdown(f"#### {t('soft_inputs.probes_header')}")
    st.markdown(t("soft_inputs.probes_intro"))
    if st.toggle(t("soft_inputs.probe_toggle", step=index + 1), value=read("si_probe"), key="si_probe",
                 help=t("soft_inputs.probe_help")):
        sync_url(si_probe=True)
        _probes(lm, lanes, index)
    else:
        sync_url(si_probe=False)

    st.markdown(f"#### {t('soft_inputs.scores_header')}")
    _scores(lm, lanes, values)

    st.markdown(f"#### {t('soft_inputs.keeps_header')}")
    st.markdown(t("soft_inputs.keeps_table"))

    choice = st.selectbox(t("soft_inputs.download_lane"), [name for _, name, _ in lanes], key="si_export_lane")
    trace = next(run.trace for _, name, run in lanes if name == choice)
    export_bar(trace, fig, "soft-inputs", key="si_export")
