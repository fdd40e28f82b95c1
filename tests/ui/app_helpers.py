"""What the AppTest modules share: a page of the real app opened on settings, and the texts it shows."""
from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qsl

import torch
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

from figures.labels import WORD_JOINER

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "The capital of France is"
NEW = 6                                 # open_page's new tokens
INTERVIEW = "pages/interview.py"
MARKDOWN_NAME = "[Click to fix](http://evil) ![x](http://127.0.0.1:8999/p.png)"   # a model name that is Markdown


def install_loads(monkeypatch, load, keep_pin: bool = False) -> list:
    """Make `load(name)` the app's model loader, with the shared-model memory emptied (the fixture that calls
    this empties it again after the test); unless `keep_pin`, no deployment pin (DECODESCOPE_MODELS).
    Returns the list of the names the app asked for, in order."""
    import ui.shared_model

    asked = []

    def spy(name=None, *args, **kwargs):
        asked.append(name)
        return load(name)

    monkeypatch.setattr(ui.shared_model, "load_model", spy)
    if not keep_pin:
        monkeypatch.delenv("DECODESCOPE_MODELS", raising=False)
    ui.shared_model._models.clear()
    forget_shared_runs()
    return asked


def forget_shared_runs() -> None:
    """Empty the Whole answers runs every session shares (they were computed on the models just forgotten)."""
    import ui.answers_run

    with ui.answers_run._LOCK:
        ui.answers_run._SHARED.clear()


def texts(section: str, lang: str = "en") -> dict:
    return json.loads((ROOT / "assets" / "texts" / lang / f"{section}.json").read_text(encoding="utf-8"))


def open_app(page: str, *, params: dict | None = None, state: dict | None = None,
             new_tokens: int = 2) -> AppTest:
    """app.py on `page` with these URL params and session state (PROMPT and `new_tokens` unless state says
    otherwise), run once; no exception allowed."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
    for key, value in (params or {}).items():
        at.query_params[key] = str(value)
    for key, value in {"prompt": PROMPT, "max_new_tokens": new_tokens, **(state or {})}.items():
        at.session_state[key] = value
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, at.exception
    return at


def figures(at) -> list:
    """Every chart's Plotly figure on the page (an AppTest, or a block of one such as `at.main`), in page
    order. Every chart is the app's chart element (ui.chart): Streamlit's own would load Plotly a second time."""
    from ui.chart import CHART_NAME, figure_data

    block = at.main if isinstance(at, AppTest) else at
    found = []
    for element in block:
        kind = getattr(element, "type", None)
        assert kind != "plotly_chart", "a chart drawn with st.plotly_chart, not ui.chart"
        if kind == "bidi_component" and element.proto.component_name == CHART_NAME:
            found.append(figure_data(element))
    return found


def open_page(folder: str, page: str, **state) -> AppTest:
    """app.py on `page` with the model in `folder`, PROMPT and NEW tokens (state may say otherwise), run once."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["model"] = folder
    at.session_state["prompt"] = PROMPT
    at.session_state["max_new_tokens"] = NEW
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(f"pages/{page}.py")
    at.run()
    assert not at.exception, at.exception
    return at


def metric(at: AppTest, label: str) -> str:
    """The value of the metric with this label."""
    return next(m.value for m in at.metric if m.label == label)


def markdown_text(at: AppTest) -> str:
    """Every Markdown element of the page, one per line."""
    return "\n".join(m.value for m in at.markdown)


def open_with(page: str, *, params: dict | None = None, state: dict | None = None) -> AppTest:
    """app.py on `page` with exactly these URL params and session state (no defaults put in), run once."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    for key, value in (params or {}).items():
        at.query_params[key] = str(value)
    for key, value in (state or {}).items():
        at.session_state[key] = value
    at.switch_page(f"pages/{page}.py")
    at.run()
    assert not at.exception, at.exception
    return at


def on_screen(at: AppTest) -> tuple:
    """What a user reads as the result: every metric, every coloured token view, how many charts."""
    metrics = [(m.label, m.value) for m in at.metric]
    views = [h.proto.body for h in at.get("html") if "title=" in h.proto.body]
    return metrics, views, len(figures(at))


def unescaped(markdown: str) -> str:
    """The text a reader sees: Markdown escapes resolved, invisible word joiners dropped."""
    return re.sub(r"\\(.)", r"\1", markdown).replace(WORD_JOINER, "")


def greedy_tokens(model, ids: list, n: int) -> list:
    """Greedy continuation by full forward passes (no cache), stopping at EOS like the app."""
    out = []
    with torch.no_grad():
        for _ in range(n):
            logits = model(input_ids=torch.tensor([ids + out])).logits[0, -1]
            out.append(int(logits.argmax()))
            if out[-1] == model.generation_config.eos_token_id:
                break
    return out


PAGE_BY_HASH = {calc_hash(p.stem): p.stem for p in (ROOT / "pages").glob("*.py")}   # st.Page hashes its url_path


def page_links(at: AppTest) -> list[tuple[str, dict]]:
    """(page stem, query parameters) of every st.page_link on the page."""
    return [(PAGE_BY_HASH[link.proto.page_script_hash], dict(parse_qsl(link.proto.query_string)))
            for link in at.get("page_link")]


# ---- a page's sentences in Chinese: no run of three Latin words outside code, the model's texts and the user's
THREE_WORDS = re.compile(r"[A-Za-z]+(?:[\s,.;:()'’]+[A-Za-z]+){2}")      # (YYYY-MM-DD is one)


def element_texts(at) -> list:
    """Every text an element of the page shows (labels, help, options, bodies), sidebar included."""
    out = []
    for node in walk(at._tree):
        proto = getattr(node, "proto", None)
        if proto is None:
            continue
        for field in ("body", "label", "help", "value", "caption", "placeholder", "text"):
            value = getattr(proto, field, None)
            if isinstance(value, str) and value:
                out.append(value)
        options = getattr(proto, "options", None)
        if options is not None and not isinstance(options, str):
            out += [o for o in options if isinstance(o, str)]
    return out


def walk(node):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from walk(child)


def latin_runs(at, own: list) -> list:
    """Runs of three Latin words in the page's texts, once code spans and the model's own texts are taken out."""
    found = []
    for text in element_texts(at):
        if text.lstrip().startswith(("<style", "<script")):          # the app's own styles and scripts
            continue
        bare = re.sub(r"<span title=[^>]*>[^<]*</span>", " ", text)      # a token view: the model's own tokens
        bare = re.sub(r"<[^>]*>", " ", re.sub(r"`[^`]*`", " ", unescaped(bare)))   # code, and markup's own words
        bare = " ".join(bare.split())         # a token view puts each token in an element of its own
        for piece in sorted(own, key=len, reverse=True):     # a token's text is code; longer texts are taken out
            piece = " ".join(piece.split())
            if len(piece) >= 3:
                bare = bare.replace(piece, " ")
        found += THREE_WORDS.findall(bare)
    return found


def open_interview(lang: str) -> AppTest:
    """The Interview page in `lang`, run once; no exception allowed."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
    at.query_params["lang"] = lang
    at.switch_page("pages/interview.py").run()
    assert not at.exception, at.exception
    return at


def card_text(at: AppTest) -> str:
    """Every Markdown block and caption on the page, in one text (the Interview cards' questions and answers)."""
    return "\n".join(m.value for m in at.markdown) + "\n".join(c.value for c in at.caption)


def reveal_cards(at: AppTest, section: str, key: str, cards, lang: str) -> list:
    """Reveal each Interview card of a set (its texts in `section`, its buttons iv_<key>_reveal_<card>) in turn:
    each shows its question first and its answer only once revealed, with every link its texts name. Returns
    (page stem, query) of every link, in order."""
    words = texts(section, lang)
    links = []
    for card in cards:
        assert words[f"{card}_q"] in card_text(at) and words[f"{card}_a"] not in card_text(at), card
        at.button(key=f"iv_{key}_reveal_{card}").click().run()
        assert not at.exception, at.exception
        assert words[f"{card}_a"] in card_text(at), card
        labels = [v for k, v in words.items() if k.startswith(f"{card}_link")]
        found = [p for p in at.get("page_link") if p.proto.label in labels]
        assert sorted(p.proto.label for p in found) == sorted(labels), card
        links += [(PAGE_BY_HASH[p.proto.page_script_hash], dict(parse_qsl(p.proto.query_string))) for p in found]
    return links

