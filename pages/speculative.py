"""Page: speculative decoding, seen: the rounds, p against q at one position, acceptance, cost, and a proof
that the rule keeps the target's distribution (and what breaks it)."""
import streamlit as st
import torch

from engine import DecodeConfig
from engine.speculative.proof import RULES, draw_next, draw_plain, first_position, fit, histogram
from engine.speculative.summary import acceptance
from figures.labels import duration, for_markdown, for_plotly, one_line, visible
from figures.speculative import (STATUS_COLOURS, acceptance_bars, draw_histograms, next_kind, p_and_q,
                                 residual_bars, rounds_strip, u_against_ratio)
from ui.export import export_bar
from ui.chart import show_figure
from ui.i18n import t
from ui.page import open_page, shared_model
from ui.present import main_chart, scroll_to_section, sized
from ui.progress import stopped_note, watched_decode
from ui.results import cached
from ui.settings import bounds, read, sync_url, url_number
from ui.shared_model import draft_model
from ui.sidebar import LIGHT_NEW_TOKENS, model_facts_panel

S = st.session_state
KINDS = ("early-exit", "prompt-lookup", "model")
VERIFY = ("greedy", "sample")
CHUNK = 5000                  # draws per rule between two progress updates
SIGNIFICANCE = 0.001          # a p-value below this: "the draws leave p"

page = open_page("spec", new_tokens=LIGHT_NEW_TOKENS, upload="sd_upload",
                 refuse=lambda tr: None if tr.rounds else t("spec.upload_no_rounds", strategy=tr.config.strategy))
row, slot, settings, uploaded = page.row, page.slot, page.settings, page.uploaded

lm = plain = None
if uploaded is None:
    lm = shared_model(settings)
# an early exit stops before the last layer: the box holds 1..layers - 1 of the model on screen, and opens a few
# layers below the top (the first layers of a model not trained to exit early rarely agree with it)
last_exit = max(lm.facts.layers - 1, 1) if lm is not None else 128
exit_default = min(max(last_exit - 3, 1), last_exit)

# ---- controls ------------------------------------------------------------------------------------------
box = row["settings"]
c1, c2, c3 = box.columns(3)
kind = c1.radio(t("spec.kind"), KINDS, key="sd_kind", index=KINDS.index(read("sd_kind")),
                format_func=lambda k: t("spec.kind_" + k.replace("-", "_")), help=t("spec.kind_help"))
layer = c2.number_input(t("spec.layer"), 1, last_exit, step=1, key="sd_layer", disabled=kind != "early-exit",
                        value=url_number("sd_layer", exit_default, 1, last_exit), help=t("spec.layer_help"))
ngram = c2.number_input(t("spec.ngram"), *bounds("sd_ngram"), step=1, key="sd_ngram", value=read("sd_ngram"),
                        disabled=kind != "prompt-lookup", help=t("spec.ngram_help"))
draft_name = c2.text_input(t("spec.model"), value=read("sd_model"), key="sd_model",
                           disabled=kind != "model", help=t("spec.model_help"))
k = c3.number_input(t("spec.k"), *bounds("sd_k"), step=1, key="sd_k", value=read("sd_k"),
                    help=t("spec.k_help"))
verify = c3.radio(t("spec.verify"), VERIFY, horizontal=True, key="sd_verify", index=VERIFY.index(read("sd_verify")),
                  format_func=lambda v: t("spec.verify_" + v), help=t("spec.verify_help"))
w1, w2, w3 = box.columns(3)
sampling = verify == "sample"
temperature = w1.slider(t("spec.temperature"), *bounds("sd_temperature"), step=0.05, key="sd_temperature",
                        disabled=not sampling, value=read("sd_temperature"))
top_k = w2.number_input(t("spec.top_k"), *bounds("sd_top_k"), step=1, key="sd_top_k", value=read("sd_top_k"),
                        disabled=not sampling, help=t("spec.top_k_help"))
top_p = w3.slider(t("spec.top_p"), *bounds("sd_top_p"), step=0.05, key="sd_top_p", disabled=not sampling,
                  value=read("sd_top_p"))
sync_url(sd_kind=kind, sd_layer=int(layer), sd_ngram=int(ngram), sd_model=draft_name, sd_k=int(k), sd_verify=verify,
         sd_temperature=temperature, sd_top_k=int(top_k), sd_top_p=top_p)

spec = {"early-exit": f"early-exit:{int(layer)}", "prompt-lookup": f"prompt-lookup:{int(ngram)}",
        "model": f"model:{draft_name.strip()}"}[kind]
config = DecodeConfig(strategy="speculative", draft=spec, draft_tokens=int(k), verify=verify,
                      temperature=float(temperature), top_k=int(top_k), top_p=float(top_p),
                      max_new_tokens=settings.max_new_tokens, seed=settings.seed, chat=settings.chat, top_n=10)


def the_draft_model():
    return draft_model(draft_name) if kind == "model" else None


# ---- the decode: an uploaded trace, or speculative and plain decoding on the shared model --------------------
no_draft_model = uploaded is None and kind == "model" and not draft_name.strip()
if uploaded is not None:
    model_facts_panel(uploaded.model_facts)
    trace = uploaded
    st.info(t("spec.viewing_upload", rounds=len(uploaded.rounds), draft=for_markdown(uploaded.config.draft)))
elif no_draft_model:          # the box is still empty: say what it wants, and keep the last result on screen
    st.info(t("spec.model_empty"))
    if "sd_trace" not in S:
        st.stop()
    trace, plain = S["sd_trace"], S.get("sd_plain")
else:
    def speculative_decode():
        config.validate(lm.facts.vocab_size)
        return watched_decode("sd_spec", lm, settings.prompt, config, t("spec.label_spec"),
                              draft_lm=the_draft_model())

    trace = cached("sd_trace", (lm.name, settings.prompt, config), speculative_decode)
    # plain decoding writes as many tokens as the speculative run did (that one may end early, at the end-of-text
    # token or by Stop), so that the cost below compares runs of one length
    plain_config = config.replace(strategy=verify, draft="", max_new_tokens=max(len(trace.steps), 1))
    plain = cached("sd_plain", (lm.name, settings.prompt, plain_config),
                   lambda: watched_decode("sd_plain", lm, settings.prompt, plain_config, t("spec.label_plain")))

rounds = trace.rounds
acc = acceptance(trace)

# ---- the rounds, as a strip ----------------------------------------------------------------------------------
positions = []          # (round index, draft index or None) of every position the target checked or drew at
for rnd in rounds:
    positions += [(rnd.index, j) for j, d in enumerate(rnd.drafts) if d.status != "unchecked"]
    if rnd.next_id is not None:
        positions.append((rnd.index, None))


def position_name(pos) -> str:
    rnd = rounds[pos[0]]
    if pos[1] is None:
        return t("spec.position_next", round=pos[0] + 1, token=visible(rnd.next_text),
                 kind=t("spec." + next_kind(rnd)))
    draft = rnd.drafts[pos[1]]
    return t("spec.position_draft", round=pos[0] + 1, draft=pos[1] + 1, token=visible(draft.text),
             status=t("spec." + draft.status))


def pos_key(pos) -> str:
    return f"{pos[0] + 1}.{'n' if pos[1] is None else pos[1] + 1}"


first_rejection = next(((r.index, j) for r in rounds for j, d in enumerate(r.drafts) if d.status == "rejected"), None)
default_pos = first_rejection or (positions[0] if positions else None)
keys = [pos_key(p) for p in positions]
saved_pos = S.get("sd_pos_box") or read("sd_pos")     # the box on screen, else the link
chosen = positions[keys.index(saved_pos)] if saved_pos in keys else default_pos

strip_labels = {s: t("spec." + s) for s in (*STATUS_COLOURS, "round", "draft")}
strip_labels["title"] = t("spec.strip_title", rounds=acc.rounds, tokens=acc.tokens, k=trace.config.draft_tokens)
strip = rounds_strip(rounds, strip_labels, selected=chosen)
main_chart(strip, "sd_strip", slot)
stopped_note("sd_spec")
st.markdown(t("spec.summary", text=one_line(trace.best.text), alpha=f"{acc.alpha:.3f}", kept=acc.kept,
              checked=acc.checked, per_round=f"{acc.tokens_per_round:.2f}", draft=for_markdown(trace.config.draft),
              verify=t("spec.verify_" + trace.config.verify)))
export_bar(trace, strip, "speculative", "sd_export", lesson=True)

# ---- one position: p against q, the residual, u against p/q -------------------------------------------------
st.subheader(t("spec.position_header"))
if chosen is not None:
    # the browser keeps the label it was last sent for the chosen position; a new run names the same position
    # ("2.1") otherwise, so the label is sent again whenever the run's labels change
    names = [position_name(p) for p in positions]
    if S.get("sd_pos_box") in keys and S.get("sd_pos_names") != names:
        S["sd_pos_box"] = S["sd_pos_box"]
    S["sd_pos_names"] = names
    picked = st.selectbox(t("spec.position"), keys, index=positions.index(chosen), key="sd_pos_box",
                          format_func=lambda key: names[keys.index(key)])
    chosen = positions[keys.index(picked)]
    sync_url(sd_pos=picked)
    rnd = rounds[chosen[0]]
    labels = {"p": t("spec.p"), "q": t("spec.q"), "overlap": t("spec.overlap"), "prob": t("spec.prob")}
    left, right = st.columns(2)
    if chosen[1] is not None:
        draft = rnd.drafts[chosen[1]]
        alpha = 1.0 - draft.residual_mass
        labels["title"] = t("spec.pq_title", token=for_plotly(draft.text))
        show_figure(sized(p_and_q(draft.candidates, labels, alpha, draft.token_id)), key="sd_pq", where=left)
        ratio = draft.p / draft.q if draft.q > 0 else float("inf")
        st.markdown(t("spec.check_numbers", p=f"{draft.p:.4f}", q=f"{draft.q:.4f}", ratio=f"{ratio:.4f}",
                      alpha=f"{alpha:.3f}", tv=f"{draft.residual_mass:.3f}"))
        if draft.u is not None:
            st.markdown(t("spec.check_sample", u=f"{draft.u:.4f}", ratio=f"{min(ratio, 1.0):.4f}",
                          status=t("spec." + draft.status)))
            show_figure(sized(u_against_ratio(draft.u, ratio, {"keep": t("spec.keep_zone"),
                                                               "reject": t("spec.reject_zone"),
                                                               "title": t("spec.u_title")})), key="sd_u", where=right)
        else:
            top = max(draft.candidates, key=lambda c: c.p)
            st.markdown(t("spec.check_greedy", top=for_markdown(visible(top.text)), status=t("spec." + draft.status)))
        if draft.residual:
            show_figure(sized(residual_bars(draft.residual, {"prob": t("spec.prob"), "title": t(
                "spec.residual_title", mass=f"{draft.residual_mass:.3f}")})), key="sd_residual", where=right)
    else:
        labels["title"] = t("spec.next_title", token=for_plotly(rnd.next_text), kind=t("spec." + next_kind(rnd)))
        show_figure(sized(p_and_q(rnd.next_candidates, labels, 1.0 - sum(
            max(0.0, c.p - c.q) for c in rnd.next_candidates), rnd.next_id)), key="sd_pq", where=left)
        st.markdown(t("spec.next_" + next_kind(rnd) + ("_sample" if trace.config.verify == "sample" else "_greedy"),
                      token=for_markdown(visible(rnd.next_text))))
        rejected = next((d for d in rnd.drafts if d.status == "rejected"), None)
        if rejected is not None and rejected.residual:
            show_figure(sized(residual_bars(rejected.residual, {"prob": t("spec.prob"), "title": t(
                "spec.residual_title", mass=f"{rejected.residual_mass:.3f}")})), key="sd_residual", where=right)
else:
    st.info(t("spec.no_positions"))

# ---- acceptance -------------------------------------------------------------------------------------------
st.subheader(t("spec.acceptance_header"), anchor="acceptance")
scroll_to_section("acceptance")
cols = st.columns(4)
cols[0].metric(t("spec.alpha"), f"{acc.alpha:.3f}", help=t("spec.alpha_help"))
cols[1].metric(t("spec.per_round"), f"{acc.tokens_per_round:.2f}")
cols[2].metric(t("spec.predicted"), f"{acc.predicted:.2f}", help=t("spec.predicted_help"))
cols[3].metric(t("spec.k_fixed"), trace.config.draft_tokens)
show_figure(sized(acceptance_bars(acc.rates, acc.counts, acc.alpha, {
    "title": t("spec.acceptance_title"), "rate": t("spec.rate"), "position": t("spec.draft_position"),
    "alpha": t("spec.alpha_line")})), key="sd_acceptance")
st.markdown(t("spec.acceptance_text", k=trace.config.draft_tokens, alpha=f"{acc.alpha:.3f}",
              predicted=f"{acc.predicted:.2f}", measured=f"{acc.tokens_per_round:.2f}"))

# ---- cost: speculative against plain decoding, measured ---------------------------------------------------------
if plain is not None:
    st.subheader(t("spec.cost_header"))
    spec_s = trace.timings.get("prefill_s", 0.0) + trace.timings.get("decode_s", 0.0)
    plain_s = plain.timings.get("prefill_s", 0.0) + plain.timings.get("decode_s", 0.0)
    cols = st.columns(4)
    cols[0].metric(t("spec.wall_spec"), duration(spec_s))
    cols[1].metric(t("spec.wall_plain"), duration(plain_s))
    cols[2].metric(t("spec.passes_spec"), f"{acc.target_passes} + {acc.draft_passes}", help=t("spec.passes_help"))
    cols[3].metric(t("spec.passes_plain"), len(plain.steps))
    n_spec, n_plain = len(trace.steps), len(plain.steps)
    if n_spec == n_plain:
        ratio = spec_s / plain_s if plain_s > 0 else float("nan")
        st.markdown(t("spec.cost_text", tokens=n_spec, ratio=f"{ratio:.2f}", target=acc.target_passes,
                      plain=n_plain, draft=acc.draft_passes))
    else:       # plain decoding ended sooner (its own end-of-text token, or Stop): compared per token
        ratio = (spec_s / max(n_spec, 1)) / (plain_s / n_plain) if plain_s > 0 and n_plain else float("nan")
        st.markdown(t("spec.cost_per_token", spec_tokens=n_spec, plain_tokens=n_plain, ratio=f"{ratio:.2f}",
                      target=f"{acc.target_passes / max(n_spec, 1):.2f}",
                      draft=f"{acc.draft_passes / max(n_spec, 1):.2f}"))
    if ratio >= 1:
        st.warning(t("spec.no_payoff", ratio=f"{ratio:.2f}"))
    if verify == "greedy":
        same = trace.best.token_ids == plain.best.token_ids[:len(trace.best.token_ids)]
        (st.success if same else st.error)(t("spec.same_ids" if same else "spec.other_ids"))

# ---- prove it: many draws of the next token -----------------------------------------------------------------
st.subheader(t("spec.prove_header"), anchor="prove")
scroll_to_section("prove")
st.markdown(t("spec.prove_intro"))
if lm is None:
    st.info(t("spec.prove_needs_model"))
    st.stop()
if no_draft_model:
    st.stop()
n = int(st.number_input(t("spec.prove_n"), *bounds("sd_n"), step=1000, key="sd_n", value=read("sd_n")))
sync_url(sd_n=n)
proof_id = (lm.name, settings.prompt, config.replace(max_new_tokens=1, seed=0), n, settings.seed)
p, q = cached("sd_pq_dists", proof_id[:3], lambda: first_position(lm, settings.prompt, config, the_draft_model()))
if S.get("sd_pq_dists_id") != proof_id[:3]:      # these settings give no draft here (said above): no proof
    st.stop()
proof = S.get("sd_proof")
if proof is not None and proof["id"] != proof_id:
    proof = None
go_on = st.button(t("spec.prove_run"), key="sd_prove", icon="🎲", type="primary")
if go_on:
    generator = torch.Generator().manual_seed(settings.seed)
    vocab = p.shape[0]
    proof = {"id": proof_id, "done": 0, "counts": {r: torch.zeros(vocab) for r in ("plain", *RULES)},
             "kept": {r: 0 for r in RULES}}
    S["sd_proof"] = proof
    bar = st.progress(0.0, text=t("spec.prove_progress", done=0, n=n))
    stop_box = st.empty()
    stop_box.button(t("common.stop"), key="sd_prove_stop", icon="⏹")   # a click stops this run; the draws so far stay
    while proof["done"] < n:
        size = min(CHUNK, n - proof["done"])
        proof["counts"]["plain"] += histogram(draw_plain(p, size, generator), vocab)
        for rule in RULES:
            tokens, kept = draw_next(p, q, size, generator, rule)
            proof["counts"][rule] += histogram(tokens, vocab)
            proof["kept"][rule] += int(kept.sum())
        proof["done"] += size
        bar.progress(proof["done"] / n, text=t("spec.prove_progress", done=f"{proof['done']:,}", n=f"{n:,}"))
    bar.empty()
    stop_box.empty()
if proof is not None and proof["done"] > 0:
    done = proof["done"]
    top = torch.topk(p, min(10, p.shape[0])).indices.tolist()
    panels, verdicts = [], []
    for rule in ("plain", *RULES):
        result = fit(proof["counts"][rule], p)
        kept = f"{proof['kept'][rule] / done:.3f}" if rule in proof["kept"] else "-"
        panels.append((t("spec.panel_" + rule, tv=f"{result.tv:.4f}", pvalue=f"{result.p_value:.3g}", kept=kept),
                       [float(proof["counts"][rule][i]) / done for i in top]))
        verdicts.append(t("spec.verdict_" + ("follows" if result.p_value > SIGNIFICANCE else "leaves"),
                          rule=t("spec.rule_" + rule), pvalue=f"{result.p_value:.3g}", tv=f"{result.tv:.4f}",
                          dof=result.dof, kept=kept))
    show_figure(sized(draw_histograms([float(p[i]) for i in top], [lm.token_texts[i] for i in top], panels, {
        "title": t("spec.prove_title", n=f"{done:,}"), "drawn": t("spec.drawn"), "p": t("spec.p")})),
        key="sd_proof_chart")
    if done < n:
        st.warning(t("spec.prove_stopped", done=f"{done:,}", n=f"{n:,}"))
    st.markdown("\n".join(f"- {v}" for v in verdicts))
    alpha_exact, alpha_ids = float(torch.minimum(p, q).sum()), float((p * q).sum())
    st.markdown(t("spec.prove_explain", alpha=f"{alpha_exact:.3f}", alpha_ids=f"{alpha_ids:.3f}",
                  significance=SIGNIFICANCE))
