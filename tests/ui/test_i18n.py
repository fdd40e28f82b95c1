"""Texts per language: the same keys and placeholders everywhere, and no Chinese text left in English."""
from __future__ import annotations

import json
import re
import string
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEXTS = ROOT / "assets" / "texts"
LANGS = ("en", "zh")
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]")
# Latin words a Chinese text may keep as they are: names, units and the field's own terms.
KEEP_LATIN = {
    "decodescope", "token", "tokens", "id", "ids", "logit", "logits", "softmax", "top", "k", "p", "min", "kv",
    "beam", "beams", "gumbel", "embedding", "json", "html", "url", "nats", "mb", "kb", "gb", "smollm2", "instruct",
    "hugging", "face", "hf", "gpt", "llama", "vllm", "pagedattention", "straight", "through", "one", "hot",
    "teacher", "forcing", "exposure", "bias", "scheduled", "sampling", "transformer", "e", "i", "n", "x",
    "language", "bos", "eos", "pad", "chatml", "safetensors", "gguf", "csv", "png", "svg", "pytorch", "torch",
    "argmax", "arg", "max", "tau", "q", "v", "cpu", "gpu", "ram", "api", "ok",
    "dry", "xtc", "mirostat", "h",          # sampler names, the same in every language
}


def _load(lang: str, section: str) -> dict:
    return json.loads((TEXTS / lang / f"{section}.json").read_text(encoding="utf-8"))


def _sections(lang: str) -> set[str]:
    return {p.stem for p in (TEXTS / lang).glob("*.json")}


SECTIONS = sorted(_sections("en") | _sections("zh"))


def _placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_every_language_has_the_same_sections():
    assert _sections("en") == _sections("zh")


@pytest.mark.parametrize("section", SECTIONS)
def test_every_key_exists_in_every_language(section):
    keys = {lang: set(_load(lang, section)) if (TEXTS / lang / f"{section}.json").is_file() else set()
            for lang in LANGS}
    missing = {lang: sorted(set().union(*keys.values()) - own) for lang, own in keys.items()}
    assert not any(missing.values()), f"{section}: keys missing per language: {missing}"


@pytest.mark.parametrize("section", SECTIONS)
def test_texts_are_nonempty_strings_with_the_same_placeholders(section):
    en, zh = _load("en", section), _load("zh", section)
    for key in set(en) & set(zh):
        assert isinstance(en[key], str) and en[key].strip(), f"en {section}.{key} is empty or not a string"
        assert isinstance(zh[key], str) and zh[key].strip(), f"zh {section}.{key} is empty or not a string"
        assert _placeholders(en[key]) == _placeholders(zh[key]), f"{section}.{key}: placeholders differ"


def _untranslated_words(zh: str) -> list[str]:
    """Latin words in a Chinese text that has no Chinese in it at all (placeholders and markup removed)."""
    if CJK.search(zh):
        return []
    bare = re.sub(r"\{[^}]*\}|`[^`]*`|https?://\S+|\$[^$]*\$", " ", zh)
    return [w for w in re.findall(r"[A-Za-z]+", bare) if w.lower() not in KEEP_LATIN]


@pytest.mark.parametrize("section", SECTIONS)
def test_chinese_texts_are_not_still_english(section):
    en, zh = _load("en", section), _load("zh", section)
    still_english = {}
    for key, text in zh.items():
        words = _untranslated_words(text)
        copied = text == en.get(key) and len(re.findall(r"[A-Za-z]{2,}", text)) >= 3 and not CJK.search(text)
        if words or copied:
            still_english[key] = text
    assert not still_english, f"zh {section}: texts still in English: {still_english}"


def test_the_english_check_catches_an_untranslated_text():
    assert _untranslated_words("Loading the model…") == ["Loading", "the", "model"]
    assert _untranslated_words("正在加载 {name}…") == []
    assert _untranslated_words("KV · top-k") == []


LITERAL_KEY = re.compile(r"""\bt\(\s*["']([a-z_]+\.[A-Za-z0-9_]+)["']\s*[,)]""")


def test_every_literal_key_used_in_the_code_has_an_english_text():
    known = {f"{s}.{k}" for s in _sections("en") for k in _load("en", s)}
    files = [ROOT / "app.py", *(ROOT / "pages").glob("*.py"), *(ROOT / "ui").glob("*.py")]
    files = [f for f in files if f.name != "i18n.py"]      # its docstring shows the call with a made-up key
    used = {(f.name, key) for f in files for key in LITERAL_KEY.findall(f.read_text(encoding="utf-8"))}
    missing = sorted(f"{name}: {key}" for name, key in used if key not in known)
    assert not missing, f"keys used in code but missing from assets/texts/en: {missing}"


def _is_punct(ch: str) -> bool:
    import unicodedata

    return unicodedata.category(ch)[0] in "PS"


def _unrendered_bold(text: str) -> list[str]:
    """`**` pairs that CommonMark will not turn into bold.

    Chinese text has no spaces, so a pair like `**束搜索（beam search）**同时` fails: a closing
    `**` after punctuation must be followed by a space or punctuation (likewise an opening
    `**` before punctuation must follow one). The reader then sees the asterisks.
    """
    parts = text.split("**")
    bad = []
    for i in range(1, len(parts) - 1, 2):       # parts[i] is meant to be bold
        before, inner, after = parts[i - 1][-1:], parts[i], parts[i + 1][:1]
        opens = inner[:1] and not inner[0].isspace() and (
            not _is_punct(inner[0]) or not before or before.isspace() or _is_punct(before))
        closes = inner[-1:] and not inner[-1].isspace() and (
            not _is_punct(inner[-1]) or not after or after.isspace() or _is_punct(after))
        if not (opens and closes):
            bad.append(f"**{inner}**")
    return bad


@pytest.mark.parametrize("section", SECTIONS)
@pytest.mark.parametrize("lang", LANGS)
def test_bold_markup_renders(lang, section):
    path = TEXTS / lang / f"{section}.json"
    if not path.is_file():
        pytest.skip(f"no {lang}/{section}.json")
    broken = {key: _unrendered_bold(text) for key, text in _load(lang, section).items() if _unrendered_bold(text)}
    assert not broken, f"{lang} {section}: bold that will show its asterisks: {broken}"


def test_the_bold_check_knows_commonmark_flanking():
    assert _unrendered_bold("**束搜索（beam search）**同时") == ["**束搜索（beam search）**"]
    assert _unrendered_bold("**束搜索**（beam search）同时") == []
    assert _unrendered_bold("是 **token id**。每一步") == []
    assert _unrendered_bold("a **bold** word and **（x）** here") == []


@pytest.mark.parametrize("section", SECTIONS)
@pytest.mark.parametrize("lang", LANGS)
def test_no_key_is_written_twice(lang, section):
    """JSON keeps the last of two equal keys, so the first text would silently never show."""
    path = TEXTS / lang / f"{section}.json"
    if not path.is_file():
        pytest.skip(f"no {lang}/{section}.json")
    keys = []
    json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=lambda pairs: keys.extend(k for k, _ in pairs))
    twice = sorted({k for k in keys if keys.count(k) > 1})
    assert not twice, f"{lang}/{section}.json has these keys more than once: {twice}"


@pytest.mark.parametrize("values,expected", [
    ({"kept": "1", "mass": "0.90"}, "temperature 0.7 kept 1 token covering 0.90 of the mass"),
    ({"kept": "12", "mass": "0.90"}, "temperature 0.7 kept 12 tokens covering 0.90 of the mass"),
    ({"kept": 1, "mass": "1.00"}, "temperature 0.7 kept 1 token covering 1.00 of the mass"),
])
def test_a_count_of_one_takes_the_singular_noun(values, expected):
    """'1 tokens kept' reads '1 token kept'; 21 or 1,001 tokens stay plural (only a count of exactly 1 agrees)."""
    from ui.i18n import singular

    text = singular("temperature 0.7 kept {kept} tokens covering {mass} of the mass", values, "en")
    assert text.format(**values) == expected
    assert singular("{kept} 个 token", values, "zh") == "{kept} 个 token"        # Chinese has no plural form


def test_a_sentence_whose_verb_changes_with_one_has_its_own_wording(monkeypatch):
    """'the top 1 answers in this table are' becomes 'the top answer in this table is' (a key's __k_1 variant)."""
    import ui.i18n

    monkeypatch.setattr(ui.i18n, "language", lambda: "en")
    one = ui.i18n.t("answers.certified", k=1, depth=8)
    three = ui.i18n.t("answers.certified", k=3, depth=8)
    assert "the top answer in this table is" in one and "top 1 answers" not in one
    assert "the top 3 answers in this table are" in three


def test_chinese_texts_use_one_word_for_a_token_and_for_nats():
    """One word each across the Chinese texts (the lesson file's included): 'token', as most of them say, never
    '词元' beside it; the unit nats as 奈特 (bits 比特); and no English field name ('prompt：') opening a sentence."""
    mixed = {}
    for path in sorted((TEXTS / "zh").glob("*.json")):
        for key, text in _load("zh", path.stem).items():
            if "词元" in text or re.search(r"\bnats\b", text) or re.match(r"(prompt|reference)：", text):
                mixed[f"{path.stem}.{key}"] = text[:60]
    assert not mixed, mixed
