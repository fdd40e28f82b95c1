"""Page: structured output. A grammar's mask at every step, Z_t, forced steps, and what the constraint cost."""
import streamlit as st

from engine import DecodeConfig, DecodeScopeError
from engine.config import GRAMMAR_KINDS
from engine.grammar.constrain import output_verdict, stop_reason
from engine.tokens import first_difference
from figures.labels import for_markdown, one_line, visible
from figures.structured import feasible_strip
from ui.export import export_bar
from ui.grammar_examples import EXAMPLES, NEEDS
from ui.grammar_words import error_text, verdict_text
from ui.i18n import t
from ui.page import open_page, shared_model
from ui.present import main_chart
from ui.progress import stopped_note, watched_decode
from ui.results import cached, keep_or_stop
from ui.settings import read, sync_long_text, sync_url, url_number, url_value
from ui.sidebar import DEFAULT_NEW_TOKENS, model_facts_panel
from ui.url_memory import arrived_by_menu

STRATEGIES = ("greedy", "sample", "beam")
SHOWN_GRAMMAR = 600        # characters of an uploaded trace's grammar shown above its run
S = st.session_state

def _pick(key: str, options: tuple, default: str) -> str:
    saved = url_value(key, default, str)
    return saved if saved in options else default


def _raise_length(kind: str, name: str) -> None:
    """A ready example gets the new tokens it needs to finish (ui.grammar_examples.NEEDS) when it is chosen or
    the page is reached with a shorter length from another page; the user can lower it again."""
    need = NEEDS.get(kind, {}).get(name)
    if need is not None and S.get("max_new_tokens", read("max_new_tokens")) < need:
        S["max_new_tokens"] = S["so_raised"] = need


# the example the page opens on: the box's, else the address's, else the first of its kind
opening_kind = S.get("so_kind") or _pick("so_kind", GRAMMAR_KINDS, "json_schema")
opening_example = S.get("so_example") or _pick("so_example", (*EXAMPLES[opening_kind], "custom"),
                                               next(iter(EXAMPLES[opening_kind])))
if arrived_by_menu():
    _raise_length(opening_kind, opening_example)
# a saved constrained trace reopens without the model; any other gets one line
page = open_page("structured", upload="so_upload",
                 new_tokens=max(DEFAULT_NEW_TOKENS, NEEDS.get(opening_kind, {}).get(opening_example, 0)),
                 refuse=lambda tr: None if any(s.grammar is not None for s in tr.steps)
                 else t("structured.upload_no_mask", strategy=tr.config.strategy))
row, slot, settings, uploaded = page.row, page.slot, page.settings, page.uploaded
lm = shared_model(settings) if uploaded is None else None


# ---- the grammar -------------------------------------------------------------------------------------
def _example_chosen() -> None:
    """A ready example replaces the text in the box, with the length it needs; "custom" leaves it to the user."""
    kind, name = S["so_kind"], S["so_example"]
    if name in EXAMPLES[kind]:
        S["so_grammar"] = EXAMPLES[kind][name]
        _raise_length(kind, name)


def _grammar_edited() -> None:
    """A ready example's text replaced by the user's own: the box names "custom" from now on."""
    kind, name = S["so_kind"], S.get("so_example")
    if name in EXAMPLES[kind] and S["so_grammar"] != EXAMPLES[kind][name]:
        S["so_example"] = "custom"


def _kind_chosen() -> None:
    S["so_example"] = next(iter(EXAMPLES[S["so_kind"]]))
    _example_chosen()


box = row["settings"]
c1, c2, c3 = box.columns([2, 2, 2])
kind = c1.radio(t("structured.kind"), GRAMMAR_KINDS, key="so_kind", horizontal=True, on_change=_kind_chosen,
                index=GRAMMAR_KINDS.index(_pick("so_kind", GRAMMAR_KINDS, "json_schema")),
                format_func={k: t("structured.kind_" + k) for k in GRAMMAR_KINDS}.get)   # labels of this run's language
names = (*EXAMPLES[kind], "custom")
example = c2.selectbox(t("structured.example"), names, key="so_example", on_change=_example_chosen,
                       index=names.index(_pick("so_example", names, names[0])),
                       format_func={n: t("structured.example_" + n) for n in names}.get)
strategy = c3.radio(t("structured.strategy"), STRATEGIES, key="so_strategy", horizontal=True,
                    index=STRATEGIES.index(_pick("so_strategy", STRATEGIES, "greedy")),
                    format_func={s: t("structured.strategy_" + s) for s in STRATEGIES}.get)
default_text = EXAMPLES[kind].get(example) or EXAMPLES[kind][next(iter(EXAMPLES[kind]))]
text = box.text_area(t("structured.grammar_" + kind), value=url_value("so_grammar", default_text), key="so_grammar",
                     height=110 if kind in ("json_schema", "lark") else 68, help=t("structured.grammar_help"),
                     on_change=_grammar_edited)
if example != "custom" and text != EXAMPLES[kind][example]:
    example = "custom"          # an edited example is the user's own grammar
if S.get("so_raised") is not None:
    box.caption(t("structured.length_raised", n=S.pop("so_raised")))
sync_url(so_kind=kind, so_example=example, so_strategy=strategy)
sync_long_text("so_grammar", text)

config = DecodeConfig(strategy=strategy, max_new_tokens=settings.max_new_tokens, seed=settings.seed,
                      chat=settings.chat, top_n=10, num_beams=3, grammar_kind=kind, grammar=text)
free_config = DecodeConfig(strategy="greedy", max_new_tokens=settings.max_new_tokens, chat=settings.chat, top_n=10)

# ---- the two runs: constrained, and free greedy beside it (an uploaded trace: its own run, nothing beside) ----
free = None
if uploaded is not None:
    model_facts_panel(uploaded.model_facts)
    trace = uploaded
    st.info(t("structured.viewing_upload", kind=t("structured.kind_" + trace.config.grammar_kind),
              strategy=t("structured.strategy_" + trace.config.strategy) if trace.config.strategy in STRATEGIES
              else trace.config.strategy))
    grammar = trace.config.grammar              # the file's own grammar, as literal text (bounded on screen)
    st.code(grammar if len(grammar) <= SHOWN_GRAMMAR else grammar[:SHOWN_GRAMMAR] + " …", language=None,
            wrap_lines=True)
else:
    try:
        config.validate(lm.facts.vocab_size)
        trace = watched_decode("so_run", lm, settings.prompt, config, t("structured.running"))
        S["so_last"] = trace
    except DecodeScopeError as exc:          # a bad grammar: one line, and the last result stays
        keep_or_stop(exc, "so_last" in S, message=error_text(exc))
        trace = S["so_last"]
    free = cached("so_free", (lm.name, settings.prompt, free_config),
                  lambda: watched_decode("so_free_run", lm, settings.prompt, free_config,
                                         t("structured.running_free")))
steps = [s for s in trace.steps if s.grammar is not None]
if not steps:
    st.stop()
stopped_note("so_run")

at = (int(url_number("so_step", 1, 1, len(steps), int)) - 1) if len(steps) > 1 else 0
labels = {k: t("structured.strip_" + k) for k in ("title", "x", "y", "forced", "free", "hover")}
strip = feasible_strip(steps, labels, current=at)
main_chart(strip, "so_strip", slot)
forced = sum(1 for s in steps if s.grammar.forced)
low = min(steps, key=lambda s: s.grammar.feasible_mass)
st.caption(t("structured.strip_caption", forced=forced, n=len(steps), step=low.index + 1,
             z=f"{low.grammar.feasible_mass:.2g}", token=for_markdown(visible(low.chosen_texts[0]))))

# ---- the outcome ------------------------------------------------------------------------------------------
config = trace.config                 # the grammar this result was decoded under (the last good one)
valid, verdict, values = output_verdict(config.grammar_kind, config.grammar, trace.best.text)
why = verdict_text(verdict, values)
if stop_reason(trace) == "max_tokens":
    st.error(t("structured.stopped_max", n=config.max_new_tokens))
elif valid is False:
    st.error(t("structured.not_valid", why=why))
elif valid is None:
    st.info(t("structured.unchecked", why=why))
else:
    st.success(t("structured.valid", why=why))

left, right = st.columns(2)
left.markdown(t("structured.constrained_text", text=one_line(trace.best.text)))
left.metric(t("structured.logprob"), f"{trace.best.cum_logprob:.2f}", help=t("structured.logprob_help"))
if free is None:
    right.caption(t("structured.free_needs_model"))
else:
    cost = free.best.cum_logprob - trace.best.cum_logprob
    right.markdown(t("structured.free_text", text=one_line(free.best.text)))
    right.metric(t("structured.logprob"), f"{free.best.cum_logprob:.2f}", delta=f"{cost:+.2f}", delta_color="off",
                 help=t("structured.cost_help"))
    free_valid, free_verdict, free_values = output_verdict(config.grammar_kind, config.grammar, free.best.text)
    st.markdown(t("structured.cost_line", cost=f"{cost:.2f}", free_valid=t(f"structured.free_valid_{free_valid}"),
                  why=verdict_text(free_verdict, free_values)))

# ---- one step: the candidates before and after the mask ---------------------------------------------------
st.subheader(t("structured.step_header"))
if len(steps) > 1:
    if S.get("so_step", 1) > len(steps):      # a shorter run than the last one
        S["so_step"] = len(steps)
    at = st.slider(t("structured.step"), 1, len(steps), value=at + 1, key="so_step") - 1
    sync_url(so_step=at + 1)
step = steps[at]
g = step.grammar
c1, c2, c3 = st.columns(3)
vocab = lm.facts.vocab_size if lm is not None else trace.model_facts.get("vocab_size")
c1.metric(t("structured.allowed"), f"{g.allowed:,}",
          help=t("structured.allowed_help", vocab=f"{vocab:,}" if isinstance(vocab, int) else "?"))
c2.metric("Z_t", f"{g.feasible_mass:.4g}", help=t("structured.z_help"))
c3.metric(t("structured.forced"), t("structured.yes") if g.forced else t("structured.no"),
          help=t("structured.forced_help"))
rows = [f"| {t('structured.col_rank')} | {t('structured.col_token')} | {t('structured.col_mask')} | "
        f"{t('structured.col_before')} | {t('structured.col_after')} |", "|---:|---|---|---:|---:|"]
for cand in sorted(step.candidates, key=lambda c: c.rank):
    token = f"`{visible(cand.text)}`" if "`" not in cand.text else for_markdown(visible(cand.text))
    if cand.kept and cand.token_id == step.chosen_ids[0]:
        token = f"**{token}** ←"
    # a removed token is named so in a column of its own: a line through a CJK character changes it (一, 二)
    removed = "" if cand.kept else t("structured.removed")
    rows.append(f"| {cand.rank} | {token} | {removed} | {cand.prob:.4f} | {cand.shaped_prob:.4f} |")
st.markdown("\n".join(rows))
st.caption(t("structured.table_caption"))

# ---- the token boundary (it needs the model's tokenizer) -----------------------------------------------------
if lm is None:
    export_bar(trace, strip, "structured", key="so_export", lesson=True)
    st.stop()
ids = [i for i in trace.best.token_ids if i not in lm.eos_token_ids]
own = lm.tokenizer.encode(lm.tokenizer.decode(ids, skip_special_tokens=True), add_special_tokens=False)
split = first_difference(ids, own)
if split is None:
    st.markdown(t("structured.boundary_same", n=len(ids)))
else:
    st.markdown(t("structured.boundary_differs", n=len(ids), m=len(own), step=split + 1,
                  grammar=for_markdown(visible(lm.token_texts[ids[split]])) if split < len(ids) else "∅",
                  own=for_markdown(visible(lm.token_texts[own[split]])) if split < len(own) else "∅"))

export_bar(trace, strip, "structured", key="so_export", lesson=True)   # the trace keeps every mask, read back whole
