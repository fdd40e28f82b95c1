"""WCAG contrast of text as Chromium draws it: colours read from computed styles, opacity carried down to the
text, measured against the page's background (the readability tests of several modules)."""
from __future__ import annotations

import re


def rgb(text: str) -> tuple:
    values = [float(v) for v in re.findall(r"[\d.]+", text)]
    return tuple(values[:3]) + ((values[3],) if len(values) > 3 else (1.0,))


def luminance(colour: tuple) -> float:
    def channel(c):
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = colour[:3]
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(fore: tuple, back: tuple, alpha: float = 1.0) -> float:
    """WCAG contrast of `fore` drawn with opacity `alpha` over the opaque `back`."""
    mixed = tuple(alpha * f + (1 - alpha) * b for f, b in zip(fore[:3], back[:3]))
    hi, lo = sorted((luminance(mixed), luminance(back)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def page_background(page) -> tuple:
    return rgb(page.evaluate("getComputedStyle(document.querySelector('[data-testid=\"stApp\"]')).backgroundColor"))


def text_colours(chart, selector: str) -> list:
    """(text, fill, the product of fill-opacity and opacity up to the chart) of each element drawn."""
    return chart.locator(selector).evaluate_all("""els => els.filter(e => e.getBBox().width > 0).map(e => {
        let alpha = parseFloat(getComputedStyle(e).fillOpacity);
        for (let n = e; n && !n.classList.contains('js-plotly-plot'); n = n.parentElement)
            alpha *= parseFloat(getComputedStyle(n).opacity);
        return [e.textContent, getComputedStyle(e).fill, alpha]; })""")
