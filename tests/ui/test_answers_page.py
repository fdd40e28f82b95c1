"""Whole answers in AppTest on the tiny Llama: the ledger's metrics add up, the ranked table holds the tree's
answers with their exact probabilities, the figure's heights are the probabilities, both languages, a link's
settings (a saved run's reader is tested in tests/engine/test_answers_cli.py)."""
from __future__ import annotations

import math
import re

import pytest

from streamlit.testing.v1 import AppTest

from app_helpers import PROMPT, ROOT, figures, open_app, texts
from engine.answers import TreeSettings
from engine.answers.run import explore
from tiny_models import tiny_llama

pytestmark = [pytest.mark.apptest, pytest.mark.tiny, pytest.mark.usefixtures("navigation_frame")]
SMALL = {"wa_depth": 3, "wa_budget": 24, "wa_branch": 3, "wa_samples": 8}


@pytest.fixture
def grown(monkeypatch) -> list:
    """One entry per tree the engine grows from here on, by any page, session or server."""
    import engine.answers.run

    trees, real = [], engine.answers.run.grow_tree
    monkeypatch.setattr(engine.answers.run, "grow_tree", lambda *a, **k: trees.append(1) or real(*a, **k))
    return trees


def number(shown: str) -> float:
    """A probability as the page writes it: '12.34%', '3.10e-05' or '1 − 2.00e-05'."""
    if shown.startswith("1 − "):
        return 1 - float(shown[4:])
    return float(shown[:-1]) / 100 if shown.endswith("%") else float(shown)


def test_ledger_table_and_figure_agree_with_the_engine(tiny_loads):
    at = open_app("answers", params=SMALL)
    want = explore(tiny_llama(), PROMPT, TreeSettings(depth=3, budget=24, branch=3), beams=(1, 4), samples=8)
    en = texts("answers")
    metrics = {m.label: m.value for m in at.metric}
    shown = [number(metrics[en[k]]) for k in ("m_answers", "m_prefixes", "m_left_out")]
    ledger = want.tree.ledger
    assert shown == pytest.approx([ledger.answers, ledger.prefixes, ledger.left_out], abs=6e-5)
    assert sum(shown) == pytest.approx(1, abs=2e-4)
    table = at.dataframe[0].value
    assert list(table[en["col_prob"]])[:5] == pytest.approx([a.prob for a in want.tree.answers[:5]], rel=1e-6)
    # the icicle's answer bars are the answers' probabilities; all bars of one column add up to at most 1
    fig = figures(at)[0]
    answer_bars = next(tr for tr in fig["data"] if tr["name"] == en["kind_answer"])
    assert sorted(answer_bars["y"], reverse=True)[:3] == pytest.approx([a.prob for a in want.tree.answers[:3]],
                                                                       rel=1e-6)
    columns: dict = {}
    for trace in fig["data"]:
        for x, y in zip(trace["x"], trace["y"]):
            columns[x] = columns.get(x, 0) + y
    assert columns[1] == pytest.approx(1, abs=1e-9) and all(v <= 1 + 1e-9 for v in columns.values())


def test_chinese_and_a_link_that_sets_every_setting(tiny_loads):
    params = {**SMALL, "lang": "zh", "wa_dist": "sampler", "wa_temperature": 0.7, "wa_beams": "2,8"}
    at = open_app("answers", params=params)
    zh = texts("answers", "zh")
    assert at.title[0].value == zh["title"]
    assert at.session_state["wa_dist"] == "sampler" and at.session_state["wa_temperature"] == pytest.approx(0.7)
    assert any(zh["about_sampler"] in c.value for c in at.caption)
    assert sum(1 for m in at.markdown if "束宽 8" in m.value) == 1


# ---- a saved run reopened; what the page says about certification and entropy ------------------------------
HOSTILE_PROMPT = "Über <b>x</b> ![a](http://127.0.0.1:8999/p.png)\n[click](http://x) \u202eend"


def upload(at, run) -> None:
    from engine.answers.record import to_json

    at.file_uploader(key="wa_upload").set_value(("run.json", to_json(run).encode(), "application/json")).run()
    assert not at.exception, at.exception


def test_a_saved_run_without_samples_shows_its_own_prompt_and_settings_and_which_are_live(tiny_loads):
    """The CLI's `answers --json` without --samples: the file opens, its prompt is shown as it is, its settings
    beside it, and the live settings that differ from the file's are named."""
    run = explore(tiny_loads, HOSTILE_PROMPT, TreeSettings(depth=2, budget=16, branch=2), beams=(1, 2), seed=3)
    assert run.samples is None
    at = open_app("answers", params=SMALL)
    upload(at, run)
    en, common, saved = texts("answers"), texts("common"), texts("answers_run")
    assert not at.error, [e.value for e in at.error]
    assert [c.value for c in at.code] == [HOSTILE_PROMPT]          # literally, whole
    settings_line = next(m.value for m in at.markdown if m.value.startswith(saved["file_settings"][:13]))
    for part in ("longest answer 2 tokens", "16 prefixes to expand", "2 children per prefix", "0 samples (seed 3)",
                 "beam widths placed: 2", "Chat template off"):
        assert part in settings_line, (part, settings_line)
    differ = [c.value for c in at.caption if c.value.startswith(saved["live_differs"][:20])]
    names = [common["prompt"], common["seed"], en["depth"], en["budget"], en["branch"], en["samples"], en["beams"]]
    assert len(differ) == 1 and differ[0].endswith(": " + ", ".join(names) + "."), differ   # not chat, distribution
    assert not any(" samples against the exact tree" in s.value for s in at.subheader)      # no samples section


def _bound_by_hand(run) -> tuple:
    """('open' or 'left', bound): the largest mass of a prefix not expanded against the largest child left out."""
    open_mass = max([math.exp(n.logprob) for n in run.tree.nodes if not n.expanded] + [0.0])
    left = max(n.best_left_out for n in run.tree.nodes)
    return ("open", open_mass) if open_mass >= left else ("left", left)


@pytest.mark.parametrize("settings,kind", [(TreeSettings(depth=3, budget=1, branch=16), "open"),
                                           (TreeSettings(depth=1, budget=50, branch=2), "left")])
def test_the_certificate_names_what_would_settle_it_against_the_best_answer(tiny_loads, settings, kind):
    run = explore(tiny_loads, "The capital of", settings, beams=(1,))
    found, bound = _bound_by_hand(run)
    best = max(math.exp(a.logprob) for a in run.tree.answers)
    assert found == kind and best < bound                   # the case this parameter is about
    at = open_app("answers", params=SMALL)
    upload(at, run)
    saved = texts("answers_run")
    line = next(m.value for m in at.markdown if "Not certified yet" in m.value)
    template = saved[f"not_certified_{kind}"]
    assert line.startswith(template.split("{")[0]), line
    assert f"has probability {best:.3g}" in line and f"({bound:.3g})" in line
    remedy = "More prefixes to expand (the budget) would expand it." if kind == "open" else \
        "More budget never reaches a child left out; keeping more children per prefix would."
    assert remedy in line


def test_both_entropies_say_what_they_are_over(tiny_loads):
    """The answers' entropy, renormalised over the mass the answers found hold (that share shown), worked out
    here by hand; the samples' entropy beside it, by counts, with why it differs."""
    at = open_app("answers", params=SMALL)
    want = explore(tiny_llama(), PROMPT, TreeSettings(depth=3, budget=24, branch=3), beams=(1, 4), samples=8)
    probs = [math.exp(a.logprob) for a in want.tree.answers]
    covered = sum(probs)
    entropy = -sum(p / covered * math.log(p / covered) for p in probs)
    line = next(m.value for m in at.markdown if "renormalised over the" in m.value)
    assert f"the entropy is {entropy:.3f} nats" in line and f"renormalised over the {covered:.2%} of the" in line
    assert f"the other {1 - covered:.2%}" in line
    assert "From the 8 samples, by the counts of their" in line and "whole distribution" in line


@pytest.mark.parametrize("name", ["beam ![a](http://127.0.0.1:8999/p.png)", "[click](http://x)", "", "   "])
def test_a_landing_named_with_markup_or_blank_gets_one_literal_line(tiny_loads, name):
    import json

    from engine.answers.record import to_json

    run = explore(tiny_loads, "The capital of", TreeSettings(depth=2, budget=8, branch=2), beams=(1, 2))
    data = json.loads(to_json(run))
    data["landings"][1][0] = name
    at = open_app("answers", params=SMALL)
    at.file_uploader(key="wa_upload").set_value(("run.json", json.dumps(data).encode(), "application/json")).run()
    assert not at.exception, at.exception
    assert len(at.error) == 1
    shown = re.sub(r"\\(.)", r"\1", at.error[0].value).replace("\u2060", "")     # as Markdown shows it
    assert f"landing 2: strategy {name!r} is not 'greedy' or 'beam W'" in shown, shown
    bare = re.sub(r"\\.", "", at.error[0].value)             # what Markdown shows as literal characters is gone
    assert not re.search(r"!\[|\]\(", bare), at.error[0].value


def test_answers_end_at_the_stop_strings_the_link_names_and_the_page_says_so(tiny_loads):
    """A link's stop strings reach the tree: the table holds the engine's answers for them, the stop strings are
    named beside the numbers, and the run's own settings carry them."""
    params = {**SMALL, "wa_stops": "own", "wa_stop_own": "\\n\ne"}
    at = open_app("answers", params=params)
    want = explore(tiny_llama(), PROMPT, TreeSettings(depth=3, budget=24, branch=3, stops=("\n", "e")), beams=(1, 4),
                   samples=8)
    table = at.dataframe[0].value
    en = texts("answers")
    assert list(table[en["col_prob"]]) == pytest.approx([a.prob for a in want.tree.answers[:len(table)]], rel=1e-6)
    assert any(a.stop for a in want.tree.answers)
    assert at.session_state["wa_run"].tree.settings.stops == ("\n", "e")
    named = [c.value for c in at.caption if "“\\\\n”" in c.value and "“e”" in c.value]
    assert len(named) >= 2, [c.value for c in at.caption]          # beside the ledger and the samples
    assert at.query_params["wa_stops"] == "own" and at.query_params["wa_stop_own"] == "\\n\ne"


def test_a_stop_list_that_cannot_be_used_is_one_sentence_in_the_pages_language(tiny_loads):
    at = open_app("answers", params={**SMALL, "lang": "zh", "wa_stops": "own", "wa_stop_own": "y" * 40})
    zh = texts("answers_end", "zh")
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and zh["bad_stops"].format(n=8, chars=32) in errors[0].replace("\\", "")
    assert at.session_state["wa_run"].tree.settings.stops == ()


def test_no_stop_button_once_the_run_has_ended(tiny_loads):
    at = open_app("answers", params=SMALL)
    assert at.session_state["wa_run"].landings
    assert not [b for b in at.button if b.key == "_stop_button_answers"]


def test_the_tree_is_drawn_before_the_samples_run(tiny_loads, monkeypatch):
    """The tree is on the page as soon as it is grown: a failure while the samples are drawn leaves it there."""
    import engine.answers.run
    from engine.errors import ConfigError

    def fail(*args, **kwargs):
        raise ConfigError("samples", "samples: failed on purpose")

    monkeypatch.setattr(engine.answers.run, "draw_samples", fail)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
    for key, value in SMALL.items():
        at.query_params[key] = str(value)
    at.session_state["prompt"] = PROMPT
    at.switch_page("pages/answers.py").run()
    assert any("failed on purpose" in e.value for e in at.error)
    assert len(figures(at)) == 1
    assert {m.label for m in at.metric} >= {texts("answers")["m_answers"]}


def test_a_finished_run_is_shared_by_every_session(tiny_loads, grown):
    """Two sessions on the same settings: the second shows the first one's run without computing it again."""
    first = open_app("answers", params=SMALL)
    second = open_app("answers", params=SMALL)
    assert len(grown) == 1
    assert second.dataframe[0].value.equals(first.dataframe[0].value)
    open_app("answers", params={**SMALL, "seed": 5})
    assert len(grown) == 2


def test_the_servers_own_run_of_the_defaults_is_the_one_a_first_visitor_opens(tiny_loads, grown):
    """The server computes the default page's run as it starts (ui.serve -> warm_default); a first visitor on
    the defaults then grows no tree of its own, and sees the engine's run on the page's documented defaults
    (depth 8, budget 200, 6 children, 32 samples, greedy and beam 4). Asked again, the server computes nothing."""
    from ui.answers_run import warm_default
    from ui.demo import DEFAULT_PROMPT

    assert warm_default(tiny_loads, DEFAULT_PROMPT) is not None and len(grown) == 1
    assert warm_default(tiny_loads, DEFAULT_PROMPT) is None
    at = open_app("answers", state={"prompt": DEFAULT_PROMPT})
    assert len(grown) == 1                                  # the page computed nothing
    want = explore(tiny_llama(), DEFAULT_PROMPT, TreeSettings(depth=8, budget=200, branch=6, batch=16),
                   beams=(1, 4), samples=32)
    table = at.dataframe[0].value
    col = texts("answers")["col_prob"]
    assert list(table[col])[:5] == pytest.approx([a.prob for a in want.tree.answers[:5]], rel=1e-6)


def test_the_server_computes_the_default_run_on_its_first_model(tiny_loads, grown, monkeypatch):
    """ui.serve's step after the first load: the server's first model, the English landing prompt; a page opened
    on the defaults then computes nothing."""
    import ui.serve
    import ui.shared_model

    monkeypatch.setattr(ui.shared_model, "loaded_model", lambda name: tiny_loads if name == "" else None)
    ui.serve._answers_default()
    assert len(grown) == 1
    open_app("answers", state={"prompt": "The capital of France is"})
    assert len(grown) == 1


def test_a_visitor_who_comes_while_the_run_is_computed_elsewhere_sees_its_tree_before_it_ends(tiny_loads, grown,
                                                                                              monkeypatch):
    """The server's run of the defaults is grown but still drawing its samples when a visitor comes: the visitor's
    page draws that tree while it waits (the run holds until the tree is drawn), then shows the finished run,
    computing nothing itself."""
    import threading

    import ui.answers_run as answers_run
    from ui.demo import DEFAULT_PROMPT

    drawn = []
    entered, release = threading.Event(), threading.Event()
    real_explore, real_shared = answers_run.explore, answers_run.shared_run

    def explore(*args, on_tree=None, **kwargs):
        def hold(tree):
            on_tree(tree)
            entered.set()
            release.wait(120)
        return real_explore(*args, on_tree=hold, **kwargs)

    def shared_run(identity, on_tree=None):
        def draw(tree):
            drawn.append(tree)
            on_tree(tree)
            release.set()
        return real_shared(identity, on_tree=draw)

    monkeypatch.setattr(answers_run, "explore", explore)
    monkeypatch.setattr(answers_run, "shared_run", shared_run)
    server = threading.Thread(target=answers_run.warm_default, args=(tiny_loads, DEFAULT_PROMPT))
    server.start()
    assert entered.wait(120)
    at = open_app("answers", state={"prompt": DEFAULT_PROMPT})
    server.join(120)
    assert len(drawn) == 1 and release.is_set() and len(grown) == 1
    assert len(figures(at)) >= 1 and {m.label for m in at.metric} >= {texts("answers")["m_answers"]}


def test_a_run_stopped_after_its_tree_says_it_places_no_strategy(tiny_loads, monkeypatch):
    """Stopped once the tree was grown: the strategies' section says the stopped run places none, in either
    language, rather than standing empty; and an unfinished strategy's text ends with '…'."""
    import ui.answers_run

    grown: list = []
    stopped = explore(tiny_llama(), PROMPT, TreeSettings(depth=3, budget=24, branch=3), beams=(1, 4), samples=8,
                      on_tree=grown.append, should_stop=lambda: bool(grown))
    assert stopped.tree.stopped and not stopped.landings
    monkeypatch.setattr(ui.answers_run, "shared_run", lambda identity, on_tree=None: stopped)
    for lang in ("en", "zh"):
        at = open_app("answers", params={**SMALL, "lang": lang})
        words = texts("answers_end", lang)
        assert sum(1 for m in at.markdown if m.value == words["landed_none_stopped"]) == 1


def test_a_strategy_that_does_not_end_shows_its_first_tokens_and_an_ellipsis(tiny_loads):
    at = open_app("answers", params=SMALL)
    run = at.session_state["wa_run"]
    unended = [x for x in run.landings if not x.complete]
    assert unended, "the tiny model's greedy and beam answers end within 3 tokens; pick settings where one does not"
    opened = [m.value for m in at.markdown if "does not end within 3 tokens" in m.value]
    assert len(opened) == len(unended) and all(" … (" in v for v in opened), opened


def test_every_probability_column_writes_the_three_digits_the_sentences_write(tiny_loads):
    """One number format on the page: the tables' probability columns show 3 significant digits (printf's %.3g
    in the browser), the digits the landings' sentences write, not 1.736e-2 beside 0.0174."""
    import json

    at = open_app("answers", params=SMALL)
    formats = {name: column["type_config"]["format"] for d in at.dataframe
               for name, column in json.loads(d.proto.columns).items() if "type_config" in column}
    en, agreement = texts("answers"), texts("agreement")
    assert formats.get(en["col_prob"]) == "%.3g" and formats.get(agreement["col_mass"]) == "%.3g", formats
    table = at.dataframe[0].value
    top = float(list(table[en["col_prob"]])[0])
    assert any(f"probability {top:.3g}" in m.value for m in at.markdown)     # a strategy lands on the top answer

