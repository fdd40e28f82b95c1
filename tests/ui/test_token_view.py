"""The coloured text: flagged steps outlined, token text never interpreted as markup."""
from ui.token_view import TokenView, token_html


def _tokens():
    return [TokenView(text=text, prob=0.5, rank=1, step=i) for i, text in enumerate([" a", "<b>", " c"])]


def test_flagged_steps_are_outlined_dashed_and_others_are_not():
    html = token_html(_tokens(), flagged={1}, words={"flagged": "FLAG"})
    spans = html.split("<span")[1:]
    assert "dashed" in spans[1] and "FLAG" in spans[1]
    assert "dashed" not in spans[0] and "dashed" not in spans[2]
    assert "&lt;b&gt;" in html and "<b>" not in html


def test_current_step_outline_wins_over_flag():
    html = token_html(_tokens(), current_step=1, flagged={1})
    span = html.split("<span")[2]
    assert "solid" in span and "dashed" not in span
