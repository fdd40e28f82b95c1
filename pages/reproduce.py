"""Page: same prompt, temperature 0, another answer. One prompt decoded alone and inside batches of other
people's prompts: where the logits' last bits move, where the top two were close enough for a token to flip, what
a flip there would have written, and a batch-invariant switch with its cost."""
import json

import pandas as pd
import streamlit as st

from engine.reproduce.settings import StudySettings
from engine.reproduce.study import run_study
from figures.labels import duration, for_markdown, one_line, visible
from figures.reproduce import fragile_steps, study_figure
from ui.i18n import t
from ui.page import open_page, shared_model
from ui.present import main_chart
from ui.results import cached
from ui.settings import bounds, read, sync_url
from ui.sidebar import LIGHT_NEW_TOKENS, served_selected

S = st.session_state
SIZES = ("1", "2", "3", "4", "8", "16")
FILLS = ("same", "padded")
PREFILLS = ("whole", "chunked", "stepwise")
DTYPES = ("float32", "bfloat16")
MAX_TOKENS = 64               # five to eight decodes a study: the page holds each to this length
SOURCES = [
    ("Thinking Machines Lab, Defeating Nondeterminism in LLM Inference (2025)",
     "https://thinkingmachines.ai/blog/defeating-nondeterminism-in-llm-inference/"),
    ("vLLM: batch invariance", "https://docs.vllm.ai/en/latest/features/batch_invariance/"),
    ("SGLang: deterministic inference", "https://docs.sglang.io/advanced_features/deterministic_inference.html"),
    ("llama.cpp server: cache_prompt", "https://github.com/ggml-org/llama.cpp/tree/master/tools/server"),
    ("transformers#39421: speculative decoding, do_sample=False", "https://github.com/huggingface/transformers/issues/39421"),
]

page = open_page("rp", new_tokens=LIGHT_NEW_TOKENS)
settings, box = page.settings, page.row["settings"]
if served_selected():               # a served model: N identical requests to it (no weights here for the rest)
    from ui.reproduce_served import served_section

    served_section(settings, box)
    st.stop()

# ---- controls ------------------------------------------------------------------------------------------------
c1, c2, c3 = box.columns(3)
sizes = c1.multiselect(t("rp.sizes"), SIZES, default=read("rp_sizes"), key="rp_sizes", help=t("rp.sizes_help"))
fill = c1.radio(t("rp.fill"), FILLS, index=FILLS.index(read("rp_fill")), key="rp_fill", horizontal=True,
                format_func=lambda f: t("rp.fill_" + f), help=t("rp.fill_help"))
prefill = c2.radio(t("rp.prefill"), PREFILLS, index=PREFILLS.index(read("rp_prefill")), key="rp_prefill",
                   horizontal=True, format_func=lambda p: t("rp.prefill_" + p), help=t("rp.prefill_help"))
chunk = c2.number_input(t("rp.chunk"), *bounds("rp_chunk"), value=read("rp_chunk"), step=1, key="rp_chunk",
                        disabled=prefill != "chunked", help=t("rp.chunk_help"))
verify = c2.number_input(t("rp.verify"), *bounds("rp_verify"), value=read("rp_verify"), step=1, key="rp_verify",
                         help=t("rp.verify_help"))
dtype = c3.radio(t("rp.dtype"), DTYPES, index=DTYPES.index(read("rp_dtype")), key="rp_dtype", horizontal=True,
                 help=t("rp.dtype_help"))
invariant = c3.toggle(t("rp.invariant"), value=read("rp_invariant"), key="rp_invariant", help=t("rp.invariant_help"))
sync_url(rp_sizes=",".join(sizes), rp_fill=fill, rp_prefill=prefill, rp_chunk=int(chunk), rp_dtype=dtype,
         rp_invariant=invariant, rp_verify=int(verify))

if not sizes:
    st.info(t("rp.no_sizes"))
    st.stop()
tokens = min(settings.max_new_tokens, MAX_TOKENS)
if tokens < settings.max_new_tokens:
    st.caption(t("rp.tokens_capped", asked=settings.max_new_tokens, most=MAX_TOKENS))
study_settings = StudySettings(max_new_tokens=tokens, batch_sizes=tuple(sorted(int(s) for s in sizes)), fill=fill,
                               prefill={"whole": "whole", "stepwise": "stepwise"}.get(prefill, f"chunked:{int(chunk)}"),
                               dtype=dtype, invariant=invariant, verify=int(verify), chat=settings.chat)
lm = shared_model(settings)


def compute():
    bar = st.progress(0.0, text=t("rp.progress", done=0, total=1, run=""))

    def progress(done, total, label):
        bar.progress(done / total, text=t("rp.progress", done=done + 1, total=total, run=label))

    study = run_study(lm, settings.prompt, study_settings, keep_logits=False, progress=progress)
    bar.empty()
    return study


study = cached("rp_study", (lm.name, settings.prompt, study_settings), compute, shared_on=lm)


# ---- the runs as a strip, and Δ against the margin ----------------------------------------------------------
def run_name(i: int, run) -> str:
    spec = run.spec
    if i == 0:
        return t("rp.run_alone")
    if spec.verify:
        return t("rp.run_verify", k=spec.verify)
    if spec.batch_size > 1:
        return t("rp.run_batch", size=spec.batch_size)
    if spec.chunk == 0:
        return t("rp.run_again")
    return t("rp.run_alone_prefill", prefill=spec.prefill)


names = [run_name(i, run) for i, run in enumerate(study.runs)]
labels = {key: t("rp." + key) for key in ("same", "bits", "token", "after", "fragile", "margin", "delta",
                                           "delta_hover", "margin_hover", "tie", "tie_hover", "all_zero", "closest",
                                           "step", "value", "cell")}
labels["title"] = t("rp.chart_title", dtype=study_settings.dtype,
                    mode=t("rp.mode_invariant" if invariant else "rp.mode_normal"))
figure = study_figure(study, names, lm.token_texts, labels)
main_chart(figure, "rp_chart", page.slot)

statuses = [c.status for c in study.comparisons[1:]]
counts = {s: statuses.count(s) for s in ("identical", "bits", "tokens")}
st.markdown(t("rp.summary", runs=len(statuses), identical=counts["identical"], bits=counts["bits"],
              tokens=counts["tokens"], steps=len(study.runs[0].token_ids), fragile=len(fragile_steps(study))))
closest = study.closest
if closest is not None and closest.delta > 0:
    key = "rp.closest_fragile" if closest.ratio <= 1 else "rp.closest_safe"
    st.markdown(t(key, step=closest.step + 1, run=for_markdown(names[closest.run]), margin=f"{closest.margin:.4g}",
                  delta=f"{closest.delta:.3g}", ratio=f"{closest.ratio:,.0f}" if closest.ratio >= 100 else
                  f"{closest.ratio:.3g}"))
elif closest is not None:
    st.markdown(t("rp.closest_nochange", step=closest.step + 1, margin=f"{closest.margin:.4g}"))
if counts["tokens"]:
    st.warning(t("rp.verdict_tokens", n=counts["tokens"]))
elif counts["bits"]:
    st.info(t("rp.verdict_bits_lucky" if fragile_steps(study) else "rp.verdict_bits"))
else:
    st.success(t("rp.verdict_identical"))

# ---- the texts -----------------------------------------------------------------------------------------------
st.subheader(t("rp.texts_header"))
lines = [t("rp.text_alone", text=one_line(study.texts[0]))]
for i, comparison in enumerate(study.comparisons[1:], start=1):
    if comparison.first_divergence is not None:
        step, ours, alone = comparison.first_divergence, study.runs[i].token_ids, study.runs[0].token_ids
        picked = lm.token_texts[ours[step]] if step < len(ours) else ""
        instead = lm.token_texts[alone[step]] if step < len(alone) else ""
        lines.append(t("rp.text_parted", run=for_markdown(names[i]), step=step + 1, picked=for_markdown(visible(
            picked)), instead=for_markdown(visible(instead)), text=one_line(study.texts[i])))
st.markdown("\n".join(f"- {line}" for line in lines))

table = pd.DataFrame([{
    t("rp.col_run"): names[i], t("rp.col_status"): t("rp.status_" + c.status) if i else t("rp.status_reference"),
    t("rp.col_first"): "" if c.first_divergence is None else c.first_divergence + 1,
    t("rp.col_delta"): f"{c.max_delta:.3g}", t("rp.col_fragile"): len(c.fragile_steps),
    t("rp.col_sha"): c.logits_sha256[:16], t("rp.col_seconds"): duration(run.seconds),
} for i, (run, c) in enumerate(zip(study.runs, study.comparisons))])
st.dataframe(table, hide_index=True, width="stretch")

# ---- what a flip at the closest call would write ----------------------------------------------------------------
st.subheader(t("rp.whatif_header"))
fork = study.what_if
if fork is not None:
    reference = study.runs[0]
    happened = any(c.first_divergence == fork.step for c in study.comparisons[1:])
    st.markdown(t("rp.whatif_text", step=fork.step + 1, chosen=for_markdown(visible(lm.token_texts[fork.chosen_id])),
                  forced=for_markdown(visible(lm.token_texts[fork.forced_id])),
                  margin=f"{study.comparisons[0].steps[fork.step].margin:.4g}"))
    st.info(t("rp.whatif_label") + "\n\n" + one_line(fork.text), icon="🔀")
    st.caption(t("rp.whatif_happened" if happened else "rp.whatif_not_happened"))

# ---- the batch-invariant mode: its cost, and what it leaves ---------------------------------------------------------
st.subheader(t("rp.invariant_header"))
batched = sum(run.seconds for run in study.runs if run.spec.batch_size > 1)
both = S.setdefault("rp_timings", {}).setdefault((lm.name, settings.prompt, study_settings.replace(invariant=False)),
                                                 {})
both[invariant] = batched          # the batched runs' seconds in each mode, as this session measured them
if True in both and False in both and both[False] > 0:
    st.markdown(t("rp.cost_measured", normal=duration(both[False]), invariant=duration(both[True]),
                  ratio=f"{both[True] / both[False]:.2f}"))
else:
    st.markdown(t("rp.cost_unmeasured", other=t("rp.mode_normal" if invariant else "rp.mode_invariant")))
st.markdown(t("rp.cost_published"))
left = [names[i] for i, c in enumerate(study.comparisons[1:], start=1) if c.status != "identical"]
if invariant and left:
    st.markdown(t("rp.invariant_left", runs=for_markdown(", ".join(left))))
st.markdown(t("rp.not_fixed"))

# ---- the study as JSON, and where to read more ----------------------------------------------------------------
st.download_button(t("rp.download"), json.dumps(study.to_dict(), ensure_ascii=False), file_name="reproduce.json",
                   mime="application/json", key="rp_download", icon="⬇️")
st.markdown(t("rp.sources") + "\n" + "\n".join(f"- [{title}]({url})" for title, url in SOURCES))
