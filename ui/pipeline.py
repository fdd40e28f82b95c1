"""The whole pipeline on the Step-by-step page: each sampler stage, each layer, and the way out of a loop.

Three panels under the step's chart, each a function the page calls:
  - render_stages: the current step's distribution after each processor, with what each dropped;
  - render_lens: the logit lens, layers x steps (needs the model: one extra forward pass);
  - render_escape: when the run loops, the grid of escape chances and a button that
    decodes again with the best cell's settings.
"""
from __future__ import annotations

import dataclasses

import streamlit as st
import torch

from engine import DecodeScopeError, LoadedModel, Trace
from engine.config import STAGE_NAMES as engine_stages
from engine.config import WARPED_STRATEGIES
from engine.explain.escape import TOKEN_STRATEGIES, escape_grid, loop_step, step_logits
from engine.samplers.order_gap import largest_gap
from engine.samplers.order import ORDERS, disputed
from engine.samplers.stages import chain_in_order
from engine.inside.lens import lens_of_trace
from figures.escape import column_label, escape_figure
from figures.labels import for_markdown, visible
from figures.lens import lens_figure
from figures.served import NUMBERS, badge_text, served_facts, with_badge
from figures.stages import SETTING_WORDS, stage_label, stages_figure
from ui.chart import show_figure
from ui.engine_words import engine_text
from ui.i18n import t
from ui.present import sized
from ui.results import cached

STAGE_NAMES = ("raw", *engine_stages)          # the raw distribution, then each stage
CUT_LISTED = 5


def _words(prefix: str, keys) -> dict:
    return {key: t(f"pipeline.{prefix}{key}") for key in keys}


def stage_words() -> dict:
    return {name: t(f"pipeline.stage_{name}") for name in (*STAGE_NAMES, *SETTING_WORDS)}


def _no_stages_reason(config, uploaded: bool) -> str:
    if config.strategy == "beam":
        return t("pipeline.stages_none_beam")
    if config.strategy == "greedy":
        return t("pipeline.stages_none_greedy")
    shaping = (config.temperature != 1.0 or config.top_k or config.top_p < 1.0 or config.min_p > 0
               or config.repetition_penalty != 1.0)
    return t("pipeline.stages_none_old") if uploaded and shaping else t("pipeline.stages_none_settings")


def state_words(stage) -> str:
    """The state a stateful stage carried at this step, in the reader's language ('' for a stage without one):
    mirostat's μ before and after, XTC's draw and whether it fired, DRY's matched run and the tokens it
    penalised, the temperature dynamic temperature chose, the penalties' window. A key this page does not know
    (a newer trace) is shown as it is."""
    state = getattr(stage, "state", None) or {}
    if not isinstance(state, dict):
        return ""
    parts, rest = [], dict(state)
    if "mu" in rest and "mu_next" in rest:
        parts.append(t("pipeline.state_mu", mu=_number(rest.pop("mu")), mu_next=_number(rest.pop("mu_next"))))
    if "draw" in rest:
        fired = rest.pop("fired", None)
        draw = _number(rest.pop("draw"))
        parts.append(t("pipeline.state_draw_fired" if fired else "pipeline.state_draw_held", draw=draw))
    elif rest.get("fired") is False:       # XTC drew nothing: off, or fewer than two tokens left
        rest.pop("fired")
        parts.append(t("pipeline.state_no_draw"))
    if "run" in rest:
        parts.append(t("pipeline.state_run", n=_number(rest.pop("run"))))
    if "penalised" in rest:
        parts.append(t("pipeline.state_penalised", n=_number(rest.pop("penalised"))))
    if "temperature" in rest:
        parts.append(t("pipeline.state_temperature", value=_number(rest.pop("temperature"))))
    if "window" in rest:
        parts.append(t("pipeline.state_window", n=_number(rest.pop("window"))))
    parts += [f"{visible(str(name))[:40]} {visible(str(_number(value)))[:40]}" for name, value in rest.items()]
    return t("pipeline.state_join").join(parts)


def _number(value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:.4g}"


def render_stages(step, config, key: str, uploaded: bool = False, served: bool = False, inputs=None,
                  token_texts=None, tokenize=None) -> None:
    """The current step, stage by stage, in the chosen order (a served model's step has none), each with what it
    cut, the mass it removed and a stateful stage's state. inputs: a function giving (context [1, n], raw
    logits [V], prompt length) of the step, when the model is at hand (its token_texts and tokenize with it):
    then the same settings are shown in every engine's order beside it."""
    with st.expander(t("pipeline.stages_title"), icon="🧪"):
        order = getattr(config, "sampler_order", "transformers")
        about = "pipeline.stages_order" if order == "transformers" else f"pipeline.stages_order_{_slug(order)}"
        if order == "llama.cpp" and getattr(config, "mirostat", 0) and config.strategy in WARPED_STRATEGIES:
            about += "_mirostat"                 # mirostat replaced the chain: say what ran
        st.caption(t(about))
        if served:
            st.info(t("served.cannot"))
            return
        if not step.stages:
            st.info(_no_stages_reason(config, uploaded))
            return
        words = {**stage_words(), **_words("stages_fig_", ("x", "y", "kept", "title", "chosen"))}
        if order != "transformers":
            words["x"] = t(f"pipeline.orders_x_{_slug(order)}")
        show_figure(sized(stages_figure(step, texts=words, config=config)), key=f"{key}_fig")
        rows = [{t("pipeline.col_stage"): stage_label(stage, words, config),
                 t("pipeline.col_kept"): stage.kept_count,
                 t("pipeline.col_cut"): stage.cut_count,
                 t("pipeline.col_mass"): f"{stage.removed_mass:.4f}",
                 t("pipeline.col_state"): state_words(stage),
                 t("pipeline.col_top"): f"{visible(stage.top_text)} ({stage.top_prob:.4f})",
                 t("pipeline.col_cut_tokens"): "  ".join(visible(c.text) for c in stage.cut[:CUT_LISTED])}
                for stage in step.stages]
        if not any(row[t("pipeline.col_state")] for row in rows):       # no stage with a state: no column
            rows = [{k: v for k, v in row.items() if k != t("pipeline.col_state")} for row in rows]
        st.dataframe(rows, hide_index=True, width="stretch",
                     column_config={t("pipeline.col_state"): st.column_config.TextColumn(width="medium"),
                                    # counts as every caption writes them: 49,152, not 49152
                                    t("pipeline.col_kept"): st.column_config.NumberColumn(format="localized"),
                                    t("pipeline.col_cut"): st.column_config.NumberColumn(format="localized")})
        if inputs is not None and config.strategy in WARPED_STRATEGIES:
            render_orders(step, config, key, inputs, token_texts, tokenize)


def render_orders(step, config, key: str, inputs, token_texts, tokenize=None) -> None:
    """The same settings in every engine's order: the settings an order lacks and left out, each order's stages
    when their kept sets differ, and each token that one order keeps and another drops (what users of one
    engine call 'sampled despite min-p')."""
    st.markdown(t("pipeline.orders_header_all"))
    ids = [c.token_id for c in step.candidates]
    try:
        identity = (step.index, tuple(c.token_id for c in step.candidates), step.chosen_ids[0], config.steps_key())
        context, logits, prompt_length = cached(f"{key}_orders_inputs", identity, inputs)
    except DecodeScopeError as exc:
        st.info(engine_text(exc))
        return
    # mirostat's μ at this step, as the decode recorded it: the chain recomputed here starts from it
    mu = next((s.state.get("mu") for s in step.stages if s.name == "mirostat" and getattr(s, "state", None)), None)
    chains = {order: chain_in_order(token_texts, config, context, logits, ids, order, prompt_length=prompt_length,
                                    mu=mu, tokenize=tokenize) for order in ORDERS}
    names = {order: t(f"pipeline.order_{_slug(order)}") for order in ORDERS}
    join = t("pipeline.state_join")
    for order, chain in chains.items():
        replaced = list(getattr(chain, "replaced", None) or [])
        if replaced:
            st.caption(t("pipeline.orders_replaced", order=names[order],
                         settings=join.join(_setting_name(name) for name in replaced)))
        skipped = list(getattr(chain, "skipped", None) or [])
        if skipped:
            st.caption(t("pipeline.orders_skipped", order=names[order],
                         settings=join.join(_setting_name(name) for name in skipped)))
    first = next(iter(chains.values()))
    gap = largest_gap(list(chains.values()), logits)
    differs = round(gap.size, 4) != 0            # at the 4 decimals every probability here is shown with
    if all(bool((chain.kept == first.kept).all()) for chain in chains.values()):
        st.caption(t("pipeline.orders_same_all", n=f"{int(first.kept.sum()):,}"))
        if not differs:
            st.caption(t("pipeline.orders_gap_none"))
            return
    if differs:
        _say_gap(gap, names, token_texts)
    words = {**stage_words(), **_words("stages_fig_", ("y", "kept", "title", "chosen"))}
    tabs = st.tabs([t("pipeline.orders_tab", order=names[o], n=f"{int(c.kept.sum()):,}") for o, c in chains.items()])
    for tab, chain in zip(tabs, chains.values()):
        shown = dataclasses.replace(step, stages=chain.stages)
        fig = stages_figure(shown, texts={**words, "x": t(f"pipeline.orders_x_{_slug(chain.order)}")},
                            config=config)
        show_figure(sized(fig), key=f"{key}_order_{_slug(chain.order)}", where=tab)
        tab.caption(t("pipeline.orders_kept", order=names[chain.order], n=f"{int(chain.kept.sum()):,}"))
    probs = torch.softmax(logits, -1)
    for token in _disputed_tokens(logits, list(chains.values())):
        keeps = [c for c in chains.values() if bool(c.kept[token])]
        drops = [c for c in chains.values() if not bool(c.kept[token])]
        values = dict(token=for_markdown(visible(token_texts[token])), p=f"{float(probs[token]):.4f}",
                      keeps=t("pipeline.orders_and").join(names[c.order] for c in keeps))
        if len(drops) == 1:
            text = t("pipeline.orders_case", drops=names[drops[0].order], stage=_stage_word(drops[0], token),
                     **values)
        else:
            text = t("pipeline.orders_case_many", drops=t("pipeline.state_join").join(
                t("pipeline.orders_drop_at", order=names[c.order], stage=_stage_word(c, token)) for c in drops),
                **values)
        st.warning(text, icon="🔀")


def _say_gap(gap, names: dict, token_texts) -> None:
    """The token whose probability the orders disagree on most, its probability in each, and the stage that
    moved it most."""
    probs = t("pipeline.state_join").join(t("pipeline.orders_gap_at", order=names[order], p=f"{p:.4f}")
                                          for order, p in gap.probs.items())
    st.markdown(t("pipeline.orders_gap", token=for_markdown(visible(token_texts[gap.token])), raw=f"{gap.raw:.4f}",
                  probs=probs, order=names[gap.order], stage=_plain_stage(gap.stage or ""),
                  before=f"{gap.before:.4f}", after=f"{gap.after:.4f}"))


def _plain_stage(name) -> str:
    """A stage's name without its setting, in the reader's language ('min-p', 'DRY', 'mirostat')."""
    if name not in STAGE_NAMES:
        return visible(str(name))
    return t(f"pipeline.stage_{name}").format(value="").strip().rstrip("≥τ:：").strip()


ORDER_CASES = 3        # tokens named at most, one per pair of orders that disagree


def _disputed_tokens(logits, chains: list) -> list:
    """The most likely token of each pair of orders whose kept sets differ, without repeats, at most ORDER_CASES."""
    tokens = []
    for i, a in enumerate(chains):
        for b in chains[i + 1:]:
            differ = disputed(logits, a.kept, b.kept)
            if differ and differ[0] not in tokens:
                tokens.append(differ[0])
    return tokens[:ORDER_CASES]


def _stage_word(chain, token: int) -> str:
    """The name of the stage that dropped `token`, without its setting ('min-p', 'XTC', 'mirostat')."""
    return _plain_stage(chain.dropped_by(token) or "")


def _setting_name(name: str) -> str:
    """A setting an order left out, by its label on the page (its field name if the page has none), in the
    middle of a sentence: 'presence penalty', but 'DRY multiplier'."""
    key = next((k for k in (f"samplers.{name}", f"step.{name}") if t(k) != k), None)
    if key is None:
        return visible(str(name))[:40]
    text = t(key)
    return text[0].lower() + text[1:] if len(text) > 1 and text[1].islower() else text


def step_inputs(stepper):
    """For render_stages: a function giving the context, raw logits and prompt length of the stepper's current
    step (one forward pass; vLLM's penalties count only the tokens after the prompt), or None when no model is
    at hand (an uploaded trace, a served model)."""
    lm = stepper.lm
    if lm is None:
        return None

    def inputs():
        trace = stepper.trace()
        ids = list(trace.prompt_token_ids) + list(trace.best.token_ids)[:stepper.cursor]
        with torch.inference_mode():
            return torch.tensor([ids]), step_logits(lm, trace, stepper.cursor), len(trace.prompt_token_ids)

    return inputs


def _slug(order: str) -> str:
    return order.replace(".", "_")


def render_lens(lm: LoadedModel, trace: Trace, cursor: int, key: str) -> None:
    """The logit lens over the steps so far, on demand (it costs a forward pass and a projection per layer).
    A served model's trace gets no panel: the server reports no layers, so there is nothing to offer."""
    if served_facts(trace):
        return
    with st.expander(t("pipeline.lens_title"), icon="🔭"):
        st.caption(t("pipeline.lens_intro"))
        if lm is None:
            st.info(t("pipeline.lens_needs_model"))
            return
        if not st.toggle(t("pipeline.lens_toggle"), key=f"{key}_on", help=t("pipeline.lens_toggle_help")):
            return
        model, previous = st.session_state.get(f"{key}_lens", (None, None))
        try:       # the columns of earlier steps are reused: only new steps are projected onto the vocabulary
            lens = lens_of_trace(lm, trace, previous=previous if model == lm.name else None)
        except DecodeScopeError as exc:      # say why and leave the panel
            st.info(engine_text(exc))
            return
        st.session_state[f"{key}_lens"] = (lm.name, lens)
        column = lens.column_of(cursor)
        if column is not None:
            token = for_markdown(visible(lens.chosen_texts[column]))
            layer = lens.first_top_layer(column)
            if layer is None:
                st.markdown(t("pipeline.lens_never", step=cursor + 1, token=f"“{token}”",
                              rank=lens.cells[-1][column].chosen_rank))
            elif layer == 0:
                st.markdown(t("pipeline.lens_first_emb", step=cursor + 1, token=f"“{token}”"))
            else:
                st.markdown(t("pipeline.lens_first", step=cursor + 1, token=f"“{token}”", layer=layer,
                              layers=lens.layers - 1))
        if not lens.matches_model:
            st.warning(t("pipeline.lens_mismatch", diff=f"{lens.max_diff:.3g}"))
        words = _words("lens_fig_", ("x", "y", "emb", "z", "title", "first", "hover"))
        show_figure(sized(lens_figure(lens, current=cursor, texts=words)), key=f"{key}_fig")


def render_escape(trace: Trace, key: str, can_decode: bool, on_decode=None, lm: LoadedModel | None = None) -> None:
    """When the run loops: the escape grid, and a button that decodes again with the best cell; for a run
    that draws no token (beam, soft, Gumbel), one line that says why there is no grid.

    With the model (lm) the grid reads the loop step's full logits; without it, the recorded candidates.
    on_decode(config, step) runs as the button's callback (before the page), so it may set widget state."""
    at = loop_step(trace)
    if at is not None and trace.config.strategy not in TOKEN_STRATEGIES:
        # the grid is the chance of drawing another token; a beam or a fed-back vector draws none
        reason = "beam" if trace.config.strategy == "beam" else "vector"
        st.info(t(f"pipeline.escape_none_{reason}", step=at + 1))
        return
    if at is None:
        return
    logits = None
    if lm is not None:
        identity = (lm.name, tuple(trace.prompt_token_ids), tuple(trace.best.token_ids[:at]))
        logits = cached(f"{key}_logits", identity, lambda: step_logits(lm, trace, at))
    grid = escape_grid(trace, logits=logits)
    if grid is None:
        return
    with st.expander(t("pipeline.escape_title"), icon="🚪", expanded=True):
        st.markdown(t("pipeline.escape_intro", step=grid.step + 1, token=f"“{for_markdown(visible(grid.text))}”"))
        st.caption(t("pipeline.escape_run", p=f"{grid.run_prob:.1%}"))
        if logits is not None:
            st.caption(t("pipeline.escape_exact"))
        elif grid.recorded_mass < 0.999:
            st.caption(t("pipeline.escape_tail", share=f"{grid.recorded_mass:.1%}"))
        words = _words("escape_fig_", ("x", "y", "z", "none", "top_p", "min_p", "best", "run", "title", "hover"))
        badge = badge_text(trace, trace.steps[grid.step], t("served.badge"),
                           {kind: t(f"served.numbers_{kind}") for kind in NUMBERS})
        if badge is not None:
            st.info(for_markdown(badge), icon="📡")
        fig = with_badge(escape_figure(grid, trace.config, texts=words), badge)
        show_figure(sized(fig), key=f"{key}_fig")
        row, column = grid.best()
        better = grid.config_for(trace.config, row, column)
        kind, value = grid.columns[column]
        label = t("pipeline.escape_button", t=f"{grid.temperatures[row]:g}", cut=column_label(kind, value, words))
        st.button(label, key=f"{key}_decode", icon="🔁", help=t("pipeline.escape_button_help"),
                  disabled=not can_decode or on_decode is None, on_click=on_decode, args=(better, grid.step))
