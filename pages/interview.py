"""Page: the interview question "token id or distribution?", answered, practised and rehearsed.

Every claim links to the page that demonstrates it, opened with the settings in the URL.
Practice cards show the question first and the answer on demand, with a self-rating kept
in session state. A four-minute spoken version runs against a timer.
"""
import time
from pathlib import Path

import streamlit as st

from ui.demo import DEFAULT_PROMPT, demo_language_settings
from ui.i18n import language, t
from ui.interview_agreement import agreement_cards
from ui.interview_answers import answers_cards
from ui.interview_soft import soft_input_cards
from ui.interview_reproduce import reproduce_chain
from ui.interview_structured import structured_chain
from ui.sampler_cards import sampler_cards
from ui.present import presenting
from ui.sidebar import served_selected, shared_sidebar

S = st.session_state
PAGES = Path(__file__).resolve().parent
DEMO_SETTINGS = {"prompt": DEFAULT_PROMPT, "max_new_tokens": "12", "seed": "0"}   # every link starts from these

# part of the answer -> links: (text key of the label, page stem, settings the page opens with)
DEMOS = {
    "logits": [
        ("link_greedy", "step_by_step", {"strategy": "greedy"}),
        ("link_sample", "step_by_step", {"strategy": "sample", "temperature": "0.8", "top_p": "0.9", "seed": "7"}),
        ("link_compare", "compare", {"lanes": "greedy,top_p,beam", "cmp_top_p": "0.9", "cmp_beams": "4"}),
    ],
    "teacher": [
        ("link_teacher", "teacher_forcing", {"tf_mode": "greedy"}),
        ("link_scheduled", "teacher_forcing", {"tf_mode": "greedy", "tf_eps": "0.5"}),
    ],
    "soft": [
        ("link_soft", "expected_embedding", {"ee_discrete": "greedy", "ee_temperature": "1.0"}),
        ("link_gumbel", "expected_embedding", {"ee_tau": "0.5", "ee_hard": "0", "section": "gumbel"}),
    ],
    "kv": [
        ("link_kv_greedy", "kv_cache", {"kv_strategy": "greedy"}),
        ("link_kv_beam", "kv_cache", {"kv_strategy": "beam", "kv_beams": "4"}),
        ("link_beam_tree", "beam_tree", {"num_beams": "4"}),
    ],
    "repro": [
        ("link_repro", "step_by_step", {"strategy": "sample", "temperature": "1.3", "seed": "42"}),
    ],
}
CHAIN = 5                                   # follow-ups in the chain card
RATINGS = ("again", "shaky", "solid")
SPOKEN_SECONDS = 240
CUE_STARTS = (0, 40, 70, 115, 170, 210)     # seconds into the talk where each cue begins


def demo_params(settings: dict) -> dict:
    """The query string of a demo link: shared demo settings, the page's settings, the interface choices."""
    params = {**DEMO_SETTINGS, **settings, **demo_language_settings(), "lang": language()}
    if presenting():
        params["present"] = "1"
    return params


def demo_links(part: str) -> None:
    st.caption(t("interview.try_it"))
    for label, page, settings in DEMOS[part]:
        if (PAGES / f"{page}.py").is_file():
            st.page_link(f"pages/{page}.py", label=t(f"interview.{label}"), icon="▶️",
                         query_params=demo_params(settings))
        else:
            st.caption(t("interview.missing_page", page=t(f"nav.{page}")))


# ---- cards: state lives in plain session keys, so it outlives the widgets ----------------
S.setdefault("iv_revealed", set())
S.setdefault("iv_ratings", {})
S.setdefault("iv_chain_pos", 1)


def _toggle_reveal(card: str) -> None:
    S["iv_revealed"] ^= {card}


def _next_followup() -> None:
    S["iv_chain_pos"] = min(S["iv_chain_pos"] + 1, CHAIN)
    S["iv_revealed"].discard("chain")


def _restart_chain() -> None:
    S["iv_chain_pos"] = 1
    S["iv_revealed"].discard("chain")


def _rated(card: str) -> None:
    value = S.get(f"iv_rate_{card}")
    if value is None:
        S["iv_ratings"].pop(card, None)
    else:
        S["iv_ratings"][card] = value


def rating(card: str) -> None:
    st.segmented_control(t("interview.rate_label"), RATINGS, key=f"iv_rate_{card}",
                         default=S["iv_ratings"].get(card), format_func=lambda r: t(f"interview.rate_{r}"),
                         on_change=_rated, args=(card,))


def reveal_button(card: str) -> bool:
    shown = card in S["iv_revealed"]
    st.button(t("interview.hide") if shown else t("interview.reveal"), key=f"iv_reveal_{card}",
              icon="🙈" if shown else "👀", on_click=_toggle_reveal, args=(card,))
    return shown


def simple_card(card: str) -> None:
    with st.container(border=True):
        st.markdown(f"**{t(f'interview.kind_{card}')}**")
        st.markdown(t(f"interview.{card}_q"))
        if reveal_button(card):
            st.markdown(t(f"interview.{card}_a"))
        rating(card)


def chain_card() -> None:
    pos = S["iv_chain_pos"]
    with st.container(border=True):
        st.markdown(f"**{t('interview.kind_chain')}** · {t('interview.chain_progress', n=pos, total=CHAIN)}")
        for i in range(1, pos):
            st.markdown(f"{i}. {t(f'interview.chain_q{i}')}")
            st.caption(t(f"interview.chain_a{i}"))
        st.markdown(f"{pos}. **{t(f'interview.chain_q{pos}')}**")
        shown = reveal_button("chain")
        if shown:
            st.markdown(t(f"interview.chain_a{pos}"))
            if pos < CHAIN:
                st.button(t("interview.next_followup"), key="iv_chain_next", icon="➡️", on_click=_next_followup,
                          type="primary")
            else:
                st.button(t("interview.restart"), key="iv_chain_restart", icon="🔁", on_click=_restart_chain)
        rating("chain")


# ---- a second chain: speculative decoding, each answer linked to its demo ----------------------------
SPEC_PROMPT = "The capital of France is Paris. The capital of Italy is"
SPEC_DEMOS = [   # follow-up -> (label, settings of the Speculative decoding page)
    ("link1", {"sd_kind": "early-exit", "sd_layer": "24", "sd_verify": "sample", "sd_n": "20000", "section": "prove"}),
    ("link2", {"sd_kind": "early-exit", "sd_layer": "26", "sd_verify": "sample", "sd_n": "20000", "section": "prove"}),
    ("link3", {"sd_kind": "early-exit", "sd_layer": "24", "sd_k": "4", "sd_verify": "greedy", "section": "acceptance"}),
    ("link4", {"sd_kind": "prompt-lookup", "sd_ngram": "2", "sd_k": "4", "sd_verify": "greedy"}),
]
S.setdefault("iv_spec_pos", 1)


def _spec_step(step: int) -> None:
    S["iv_spec_pos"] = step
    S["iv_revealed"].discard("spec_chain")


def spec_chain_card() -> None:
    pos, total = S["iv_spec_pos"], len(SPEC_DEMOS)
    with st.container(border=True):
        st.markdown(f"**{t('interview_spec.heading')}** · {t('interview_spec.progress', n=pos, total=total)}")
        for i in range(1, pos):
            st.markdown(f"{i}. {t(f'interview_spec.q{i}')}")
            st.caption(t(f"interview_spec.a{i}"))
        st.markdown(f"{pos}. **{t(f'interview_spec.q{pos}')}**")
        if reveal_button("spec_chain"):
            st.markdown(t(f"interview_spec.a{pos}"))
            label, settings = SPEC_DEMOS[pos - 1]
            st.page_link("pages/speculative.py", label=t(f"interview_spec.{label}"), icon="▶️",
                         query_params=demo_params({"prompt": SPEC_PROMPT, "max_new_tokens": "16", **settings}))
            following = pos + 1 if pos < total else 1
            st.button(t("interview_spec.next" if pos < total else "interview_spec.restart"), key="iv_spec_next",
                      icon="➡️" if pos < total else "🔁", on_click=_spec_step, args=(following,),
                      type="primary" if pos < total else "secondary")


# ---- the spoken version: a timer that survives reruns --------------------------------------
S.setdefault("iv_timer_banked", 0.0)     # seconds counted before the last start
S.setdefault("iv_timer_started", None)   # time.time() of the last start, None while paused


def _elapsed() -> float:
    started = S["iv_timer_started"]
    return S["iv_timer_banked"] + (time.time() - started if started is not None else 0.0)


def _start_pause() -> None:
    if S["iv_timer_started"] is None:
        S["iv_timer_started"] = time.time()
    else:
        S["iv_timer_banked"], S["iv_timer_started"] = _elapsed(), None


def _reset_timer() -> None:
    S["iv_timer_banked"], S["iv_timer_started"] = 0.0, None


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}"


def current_cue(elapsed: float) -> int:
    """Index of the cue the speaker should be on after `elapsed` seconds."""
    return max(i for i, start in enumerate(CUE_STARTS) if start <= elapsed)


def timer_view() -> None:
    elapsed = _elapsed()
    st.progress(min(elapsed / SPOKEN_SECONDS, 1.0),
                text=t("interview.timer_now", elapsed=_clock(elapsed), total=_clock(SPOKEN_SECONDS)))
    if elapsed >= SPOKEN_SECONDS:
        st.warning(t("interview.timer_over"), icon="⏰")
    st.markdown(f"**{t('interview.cues_heading')}**")
    now = current_cue(elapsed)
    for i, start in enumerate(CUE_STARTS):
        line = f"`{_clock(start)}` {t(f'interview.cue_{i + 1}')}"
        if i == now:
            st.info(line, icon="🎤")
        else:
            st.markdown(line)


# ---- the page -----------------------------------------------------------------------------
shared_sidebar()
st.title(t("interview.title"))
st.caption(t("interview.intro"))
st.subheader(t("interview.question_heading"))
st.markdown(f"> {t('interview.question')}")
st.subheader(t("interview.short_heading"))
st.markdown(t("interview.short"))

answer, cards, samplers, spoken, papers = st.tabs([t("interview.tab_answer"), t("interview.tab_cards"),
                                                    t("sampler_cards.tab"), t("interview.tab_spoken"),
                                                    t("interview.tab_papers")])
with answer:
    if served_selected():          # the demos decode on the model's weights
        st.info(t("served.demos_need_weights"))
    for part in DEMOS:
        st.markdown(f"#### {t(f'interview.part_{part}_title')}")
        st.markdown(t(f"interview.part_{part}_body"))
        demo_links(part)
    st.markdown(f"#### {t('interview.why_title')}")
    st.markdown(t("interview.why_body"))

with cards:
    st.markdown(t("interview.cards_intro"))
    simple_card("scenario")
    chain_card()
    spec_chain_card()
    simple_card("direct")
    structured_chain(demo_params)
    reproduce_chain(demo_params)
    answers_cards(demo_params)
    agreement_cards(demo_params)
    soft_input_cards(demo_params)
    ratings = list(S["iv_ratings"].values())
    st.caption(t("interview.rating_summary", rated=len(ratings), total=3,
                 **{r: ratings.count(r) for r in RATINGS}))

with samplers:
    sampler_cards(demo_params)

with spoken:
    st.markdown(t("interview.spoken_intro"))
    running = S["iv_timer_started"] is not None
    cols = st.columns([1, 1, 4])
    cols[0].button(t("interview.timer_pause") if running else t("interview.timer_start"), key="iv_timer_go",
                   icon="⏸" if running else "⏱", on_click=_start_pause, type="primary", width="stretch")
    cols[1].button(t("interview.timer_reset"), key="iv_timer_reset", icon="🔄", on_click=_reset_timer,
                   width="stretch")
    st.fragment(timer_view, run_every=1.0 if running else None)()
    st.markdown(f"#### {t('interview.remember_heading')}")
    st.success(t("interview.remember"), icon="💡")
    with st.expander(t("interview.script_heading"), expanded=presenting()):
        for i, start in enumerate(CUE_STARTS):
            st.markdown(f"`{_clock(start)}` {t(f'interview.script_{i + 1}')}")

with papers:
    st.markdown(t("interview.papers_intro"))
    for paper in ("vaswani", "jang", "bengio"):
        st.markdown(f"- {t(f'interview.paper_{paper}')}  \n  {t(f'interview.paper_{paper}_why')}")
    st.markdown(f"**{t('interview.further_heading')}**")
    st.markdown(f"- {t('interview.paper_kwon')}  \n  {t('interview.paper_kwon_why')}")
