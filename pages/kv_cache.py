"""Page: the KV cache of the trace on screen, per beam and per step; real tensors vs paged accounting."""
import streamlit as st

from engine import DecodeConfig
from engine.service import shared_service
from engine.decoding.kv import BLOCK_SIZE
from engine.inside.kv_trace import cache_steps
from figures.kv import bytes_lines, cache_rows, paged_blocks
from figures.labels import one_line
from engine.budget import SOFT_WIDTH, step_budget, tokens_within_budget
from ui.chart import show_figure
from ui.i18n import t
from ui.page import open_page, shared_model
from ui.present import main_chart, sized
from ui.results import cached
from ui.settings import bounds, read, sync_url
from ui.sidebar import LIGHT_NEW_TOKENS


page = open_page("kv", new_tokens=LIGHT_NEW_TOKENS)   # several decodes per run: open short
row, slot, settings = page.row, page.slot, page.settings
lm = shared_model(settings)



# ---- controls ------------------------------------------------------------------
left, right = row["settings"].columns(2)
strategies = ("greedy", "beam")
strategy = left.radio(t("kv.strategy"), strategies, horizontal=True, key="kv_strategy",
                      index=strategies.index(read("kv_strategy")),
                      format_func=lambda s: t("kv.strategy_" + s))
beams = right.slider(t("kv.num_beams"), *bounds("kv_beams"), key="kv_beams", value=read("kv_beams"),
                     disabled=strategy != "beam")
sync_url(kv_strategy=strategy, kv_beams=beams)
# the page decodes the trace on screen, greedy beside a beam search, and soft (its last section): one budget
width = (beams + 1 if strategy == "beam" else 1) + SOFT_WIDTH
new_tokens = tokens_within_budget(width, settings.max_new_tokens)
if new_tokens < settings.max_new_tokens:
    st.info(t("kv.capped", n=new_tokens, asked=settings.max_new_tokens, budget=f"{step_budget():,}"))
config = DecodeConfig(strategy=strategy, num_beams=beams if strategy == "beam" else 1,
                      max_new_tokens=new_tokens, seed=settings.seed, chat=settings.chat, top_n=5)

with st.spinner(t("kv.running")):
    trace = cached("kv_trace", (lm.name, settings.prompt, config),
                   lambda: shared_service().decode(lm, settings.prompt, config))

facts = lm.facts
per_row = facts.kv_bytes_per_token
steps = cache_steps(trace, per_row)
last = steps[-1]

# ---- what is measured and what is accounting -----------------------------------
st.info(t("kv.measured_vs_accounting", block=BLOCK_SIZE))
measured_per_row = last.bytes / last.rows if last.rows else 0
st.markdown(t("kv.per_row", layers=facts.layers, kv_heads=facts.kv_heads, head_dim=facts.head_dim,
              dtype_bytes=facts.dtype_bytes, per_row=f"{per_row:,}", measured=f"{measured_per_row:,.0f}",
              rows=f"{last.rows:,}", bytes=f"{last.bytes:,}"))

# ---- one step -------------------------------------------------------------------
st.subheader(t("kv.step_header"))
# steps are numbered from 1 for people (the last of a 12-token decode is step 12); CacheStep.step stays 0-based
chosen = st.slider(t("kv.step"), 1, len(steps), value=len(steps), key="kv_step") - 1 if len(steps) > 1 else 0
cs = steps[chosen]
shared = sum(1 for b in cs.paged_blocks if b.refs > 1)
cols = st.columns(5)
cols[0].metric(t("kv.metric_rows"), f"{cs.rows:,}", help=t("kv.measured_help"))
cols[1].metric(t("kv.metric_bytes"), f"{cs.bytes / 1e6:,.2f} MB", help=t("kv.measured_help"))
cols[2].metric(t("kv.metric_blocks"), f"{len(cs.paged_blocks):,}", help=t("kv.accounting_help"))
cols[3].metric(t("kv.metric_shared"), f"{shared:,}", help=t("kv.accounting_help"))
cols[4].metric(t("kv.metric_paged_bytes"), f"{cs.paged_bytes / 1e6:,.2f} MB", help=t("kv.accounting_help"))
copied = sum(b.copied for b in cs.beams)
if strategy == "beam":
    moved = [b for b in cs.beams if b.parent != b.slot]
    st.markdown(t("kv.reorder", moved=len(moved), beams=len(cs.beams), copied=f"{copied:,}") if moved
                else t("kv.no_reorder"))

row_labels = {k: t("kv." + k) for k in ("reused", "appended", "copied", "beam", "parent", "rows")}
row_labels["title"] = t("kv.rows_title", step=cs.step + 1)
main_chart(cache_rows(cs, row_labels), "kv_rows_chart", slot)

block_labels = {k: t("kv." + k) for k in ("beam", "block", "refs", "beams", "tokens", "position")}
block_labels["title"] = t("kv.blocks_title", block=BLOCK_SIZE)
show_figure(sized(paged_blocks(cs, lm.token_texts, block_labels)), key="kv_blocks_chart")
st.caption(t("kv.blocks_caption"))

# ---- over the whole trace ----------------------------------------------------------
st.subheader(t("kv.over_steps"))
line_labels = {"step": t("kv.step"), "title": t("kv.bytes_title")}
series = {t("kv.series_real"): ([c.step + 1 for c in steps], [c.bytes for c in steps]),
          t("kv.series_paged"): ([c.step + 1 for c in steps], [c.paged_bytes for c in steps])}
show_figure(sized(bytes_lines(series, line_labels)), key="kv_bytes_chart")
saving = 1 - last.paged_bytes / last.bytes if last.bytes else 0.0
st.markdown(t("kv.saving_less" if saving >= 0 else "kv.saving_more", real=f"{last.bytes / 1e6:,.2f}",
              paged=f"{last.paged_bytes / 1e6:,.2f}", percent=f"{100 * abs(saving):.0f}"))

# ---- soft decoding keeps one cache -------------------------------------------------
st.subheader(t("kv.soft_header"))
st.markdown(t("kv.soft_intro"))
greedy_config = config.replace(strategy="greedy", num_beams=1)
soft_config = config.replace(strategy="soft", num_beams=1)
with st.spinner(t("kv.running")):
    greedy = cached("kv_greedy", (lm.name, settings.prompt, greedy_config),
                    lambda: shared_service().decode(lm, settings.prompt, greedy_config))
    soft = cached("kv_soft", (lm.name, settings.prompt, soft_config),
                  lambda: shared_service().decode(lm, settings.prompt, soft_config))
common = min(len(greedy.steps), len(soft.steps))
same = all(greedy.steps[i].kv.bytes == soft.steps[i].kv.bytes and greedy.steps[i].kv.rows == soft.steps[i].kv.rows
           for i in range(common))
soft_series = {t("kv.series_greedy"): ([s.index + 1 for s in greedy.steps], [s.kv.bytes for s in greedy.steps]),
               t("kv.series_soft"): ([s.index + 1 for s in soft.steps], [s.kv.bytes for s in soft.steps])}
if strategy == "beam":
    soft_series[t("kv.series_beam", beams=beams)] = ([c.step + 1 for c in steps], [c.bytes for c in steps])
show_figure(sized(bytes_lines(soft_series, {"step": t("kv.step"), "title": t("kv.soft_title")})),
            key="kv_soft_chart")
g_last, s_last = greedy.steps[common - 1].kv, soft.steps[common - 1].kv
verdict = "kv.soft_same" if same else "kv.soft_differs"
st.markdown(t(verdict, steps=common, rows=f"{s_last.rows:,}", bytes=f"{s_last.bytes:,}",
              greedy_bytes=f"{g_last.bytes:,}"))
st.caption(t("kv.soft_texts", greedy=one_line(greedy.best.text), soft=one_line(soft.best.text)))
