"""Page: teacher forcing vs free running on one prompt and reference, and scheduled sampling over eps."""
import hashlib
import math

import streamlit as st

from engine import DecodeConfig, DecodeScopeError, Neighbour
from engine.service import shared_service
from engine.inside.teacher import curve_passes, epsilon_curve, free_run, scheduled_sampling, teacher_force
from engine.tokens import encode_prompt
from figures.embedding import neighbour_bars
from figures.labels import for_markdown, one_line, visible
from figures.teacher import epsilon_curve as epsilon_figure
from figures.teacher import kl_lines, reference_bars, swap_strip
from ui.chart import show_figure
from ui.demo import DEMO_REFERENCES, demo_reference
from ui.engine_words import engine_text
from ui.i18n import t
from ui.limits import reference_within_limit
from ui.page import open_page
from ui.present import main_chart, sized
from ui.results import cached
from ui.served import served_teacher
from ui.settings import bounds, read, sync_long_text, sync_url
from ui.shared_model import get_lm
from ui.sidebar import LIGHT_NEW_TOKENS, connected_server, served_selected

page = open_page("teacher", new_tokens=LIGHT_NEW_TOKENS)   # several decodes per run: open short
row, slot, settings = page.row, page.slot, page.settings
served = served_selected()                    # a served model scores the reference only (section 1)
lm = None if served else get_lm(settings.model)
if lm is None and not served:
    st.stop()



# ---- the reference belongs to the prompt it was written for ----------------------------------
def fingerprint(prompt: str) -> str:
    """A short stamp of a prompt, kept in the URL beside the reference it belongs to."""
    return hashlib.sha1(prompt.encode("utf-8")).hexdigest()[:10]


def _bind_reference() -> None:
    """A reference typed (or kept) here belongs to the prompt in the sidebar now."""
    S["tf_for"] = fingerprint(settings.prompt)


def reference_seed() -> int:
    """The seed a sampled reference is drawn with: not the free run's, which at temperature 1 would draw
    the very same tokens."""
    return (settings.seed + 1) % 2**31


def _use_sampled_reference() -> None:
    """A continuation the model samples becomes the reference: likely text that its greedy free run still
    parts from (its greedy continuation would be the free run itself, with no exposure bias to show)."""
    config = DecodeConfig(strategy="sample", temperature=1.0, seed=reference_seed(),
                          max_new_tokens=settings.max_new_tokens, chat=settings.chat, top_n=5)
    try:
        text = shared_service().decode(lm, settings.prompt, config).best.text
    except DecodeScopeError as exc:
        S["tf_reference_error"] = engine_text(exc)     # Markdown, in the reader's language
        return
    if text.strip():
        S["tf_reference"] = text
        _bind_reference()
    else:
        S["tf_reference_error"] = for_markdown(t("teacher.sampled_empty"))


def written_for(reference: str) -> str:
    """The prompt a reference arriving without its stamp belongs to: a demo reference to its demo prompt,
    any other to the prompt it arrived with (links from before references carried their prompt)."""
    return next((p for p, r in DEMO_REFERENCES.items() if r == reference), settings.prompt)


S = st.session_state
saved_reference = read("tf_reference", demo_reference(settings.prompt))    # in the prompt's own language
if "tf_for" not in S or "tf_reference" not in S:
    # arriving on the page (the reference box is new): a stamp left from an earlier visit means nothing now;
    # a link's stamp goes with the link's reference, and a reference without one is placed by written_for
    given = "tf_reference" in S or "tf_reference" in st.query_params
    stamp = st.query_params.get("tf_for") if given else None
    S["tf_for"] = stamp or fingerprint(written_for(saved_reference))
reference = row["settings"].text_area(t("teacher.reference"), value=saved_reference, key="tf_reference",
                         height=90, help=t("teacher.reference_help"), on_change=_bind_reference)
if S.get("tf_reference_error"):
    st.error(S.pop("tf_reference_error"))       # Markdown: a model it names is made literal
# a long reference costs a forward pass and a free run as long as itself: refused before either
reference = reference_within_limit(reference, lm)
if served:
    served_teacher(connected_server(), settings.prompt, reference, slot)
    st.stop()

def prompt_is_good() -> bool:
    """A bad prompt gets its own message below, with the last results kept; only a good one asks for a reference."""
    try:
        encode_prompt(lm, settings.prompt, chat=settings.chat)
    except DecodeScopeError:
        return False
    return True


if S["tf_for"] != fingerprint(settings.prompt) and prompt_is_good():
    # scoring a reference under a prompt it was not written for gives numbers that mean nothing
    sync_long_text("tf_reference", reference)
    sync_url(tf_for=S["tf_for"])
    st.warning(t("teacher.reference_other_prompt", prompt=one_line(settings.prompt[:120])))
    b1, b2 = st.columns(2)
    b1.button(t("teacher.use_sampled"), key="tf_use_sampled", icon="🤖", on_click=_use_sampled_reference,
              type="primary", width="stretch",
              help=t("teacher.use_sampled_help", n=settings.max_new_tokens, seed=reference_seed()))
    b2.button(t("teacher.keep_reference"), key="tf_keep_reference", icon="📌", on_click=_bind_reference,
              width="stretch")
    st.stop()
c1, c2 = row["settings"].columns(2)
modes = ("greedy", "sample")
saved_mode = read("tf_mode")
mode = c1.radio(t("teacher.mode"), modes, horizontal=True, key="tf_mode",
                index=modes.index(saved_mode) if saved_mode in modes else 0,
                format_func=lambda m: t("teacher.mode_" + m), help=t("teacher.mode_help"))
temperature = c2.slider(t("teacher.temperature"), *bounds("tf_temperature"), step=0.05, key="tf_temperature",
                        value=read("tf_temperature"), disabled=mode != "sample")
sync_long_text("tf_reference", reference)        # a reference too long for a link stays out of it
sync_url(tf_for=S["tf_for"], tf_mode=mode, tf_temperature=temperature)
temperature = temperature if mode == "sample" else 1.0

# ---- 1. teacher forcing ---------------------------------------------------------------
with st.spinner(t("teacher.running")):
    forced = cached("tf_forced", (lm.name, settings.prompt, reference, settings.chat),
                    lambda: teacher_force(lm, settings.prompt, reference, chat=settings.chat), shared_on=lm)
    # keyed by the scored ids too: when new inputs are bad, `forced` is the kept previous result
    scored = (lm.name, tuple(forced.prompt_ids), tuple(forced.reference_ids))
    run = cached("tf_free", scored + (settings.chat, mode, temperature, settings.seed),
                 lambda: free_run(lm, forced, settings.prompt, strategy=mode, temperature=temperature,
                                  seed=settings.seed, chat=settings.chat), shared_on=lm)

n = len(forced.positions)
top1 = sum(1 for p in forced.positions if p.rank == 1)
st.subheader(t("teacher.forced_header"))
st.markdown(t("teacher.forced_intro", n=n))
cols = st.columns(4)
cols[0].metric(t("teacher.metric_tokens"), f"{n}")
cols[1].metric(t("teacher.metric_logprob"), f"{forced.logprob:.2f}")
cols[2].metric(t("teacher.metric_perplexity"), f"{math.exp(-forced.logprob / n):.2f}")
cols[3].metric(t("teacher.metric_top1"), f"{top1}/{n}")
bar_labels = {k: t("teacher." + k) for k in ("prob", "rank", "entropy", "top")}
bar_labels["divergence"] = t("teacher.divergence_mark")
bar_labels["title"] = t("teacher.forced_title")
main_chart(reference_bars(forced, bar_labels, divergence=run.first_divergence), "tf_forced_chart", slot)
with st.expander(t("teacher.table")):
    st.dataframe([{t("teacher.col_pos"): p.index + 1, t("teacher.col_token"): visible(p.text),
                   t("teacher.col_prob"): round(p.prob, 4), t("teacher.col_rank"): p.rank,
                   t("teacher.col_entropy"): round(p.entropy, 3),
                   t("teacher.col_top"): " · ".join(f"{visible(c.text)} {c.value:.3f}" for c in p.top)}
                  for p in forced.positions], hide_index=True)

# ---- 2. free running -------------------------------------------------------------------
st.subheader(t("teacher.free_header"))
st.markdown(t("teacher.free_texts", reference=one_line(lm.tokenizer.decode(forced.reference_ids)),
              own=one_line(run.text), mode=t("teacher.mode_" + mode)))
if run.first_divergence is None:
    st.success(t("teacher.no_divergence", n=len(run.token_ids)))
else:
    d = run.first_divergence
    first = run.comparison[0]
    # positions are numbered from 1 for people; d is the 0-based index of the first differing token
    st.markdown(t("teacher.divergence" if d else "teacher.divergence_first", pos=d + 1,
                  own=for_markdown(visible(first.own_text)), true=for_markdown(visible(first.true_text)), same=d))
    kl_labels = {k: t("teacher." + k) for k in ("kl", "own", "true", "own_token", "own_prob")}
    kl_labels["title"] = t("teacher.kl_title")
    show_figure(sized(kl_lines(run.comparison, kl_labels)), key="tf_kl_chart")
    mean_kl = sum(c.kl for c in run.comparison) / len(run.comparison)
    st.markdown(t("teacher.kl_summary", mean=f"{mean_kl:.3f}", max=f"{max(c.kl for c in run.comparison):.3f}",
                  count=len(run.comparison)))
    if len(run.comparison) > 1:
        # start one past the divergence: at the divergence itself both prefixes are still equal
        pick = st.select_slider(t("teacher.position"), [c.index + 1 for c in run.comparison], key="tf_position",
                                value=run.comparison[1].index + 1) - 1
    else:
        pick = run.comparison[0].index
    row = next(c for c in run.comparison if c.index == pick)      # pick: 0-based, shown as pick + 1

    def with_reference(top: list, prob: float) -> list:
        """The top candidates, plus the reference token (with its probability) when it is not among them."""
        if any(c.token_id == row.true_token_id for c in top):
            return top
        return top + [Neighbour(row.true_token_id, row.true_text, prob)]

    left, right = st.columns(2)
    show_figure(sized(neighbour_bars(with_reference(row.own_top, row.own_prob_of_true), t("teacher.prob"),
                                     t("teacher.own_title", pos=pick + 1), highlight_id=row.true_token_id,
                                     range_max=1.0)),
                key="tf_own_chart", where=left)
    show_figure(sized(neighbour_bars(with_reference(row.true_top, forced.positions[pick].prob),
                                     t("teacher.prob"),
                                     t("teacher.true_title", pos=pick + 1), highlight_id=row.true_token_id,
                                     range_max=1.0)), key="tf_true_chart", where=right)
    st.caption(t("teacher.pair_caption", kl=f"{row.kl:.3f}", prob=f"{row.own_prob_of_true:.4f}",
                 token=for_markdown(visible(row.true_text))))

# ---- 3. scheduled sampling ----------------------------------------------------------------
st.subheader(t("teacher.scheduled_header"))
st.markdown(t("teacher.scheduled_intro", seed=settings.seed))
eps = st.slider("eps", *bounds("tf_eps"), step=0.05, key="tf_eps", value=read("tf_eps"),
                help=t("teacher.eps_help"))
sync_url(tf_eps=eps)
identity = scored + (settings.chat, mode, temperature, settings.seed)
with st.spinner(t("teacher.running")):
    mixed = cached("tf_mixed", identity + (eps,), lambda: scheduled_sampling(
        lm, forced, eps, seed=settings.seed, strategy=mode, temperature=temperature), shared_on=lm)
swapped = sum(mixed.swapped)
cols = st.columns(3)
cols[0].metric(t("teacher.metric_swapped"), f"{swapped}/{n}")
cols[1].metric(t("teacher.metric_logprob"), f"{mixed.logprob:.2f}", delta=f"{mixed.logprob - forced.logprob:+.2f}",
               help=t("teacher.delta_help"))
cols[2].metric(t("teacher.metric_passes"), f"{mixed.forward_passes}")
strip_labels = {k: t("teacher." + k) for k in ("swapped", "kept", "logprob")}
strip_labels["title"] = t("teacher.strip_title", eps=f"{eps:.2f}", swapped=swapped, n=n)
show_figure(sized(swap_strip(forced, mixed, strip_labels)), key="tf_strip_chart")

points = st.select_slider(t("teacher.points"), [3, 5, 6, 11, 21], value=11, key="tf_points")
# the curve costs many forward passes (about points/2 free runs): it runs when asked, and says so first
st.caption(t("teacher.curve_cost", points=points, passes=f"{curve_passes(n, points, settings.seed):,}", n=n))
show_curve = st.toggle(t("teacher.curve_toggle"), value=read("tf_curve"), key="tf_curve")
sync_url(tf_curve=show_curve)          # a shared link opens with the curve when it was on
if show_curve:
    with st.spinner(t("teacher.curve_running", points=points)):
        curve = cached("tf_curve_runs", identity + (points,), lambda: epsilon_curve(
            lm, forced, points=points, seed=settings.seed, strategy=mode, temperature=temperature), shared_on=lm)
    curve_labels = {k: t("teacher." + k) for k in ("curve", "logprob", "swapped", "teacher", "free")}
    curve_labels["title"] = t("teacher.curve_title")
    free_line = run.logprob if len(run.token_ids) == n else None
    show_figure(sized(epsilon_figure(curve, curve_labels, forced.logprob, free_line)), key="tf_curve_chart")
    ends = dict(first=f"{curve[0].logprob:.2f}", last=f"{curve[-1].logprob:.2f}", teacher=f"{forced.logprob:.2f}")
    if free_line is not None:
        st.markdown(t("teacher.curve_summary", free=f"{run.logprob:.2f}", **ends))
    else:   # the free run met end-of-text early: it scores only part of the reference
        st.markdown(t("teacher.curve_summary_stopped", own=len(run.token_ids), n=n, **ends))
