"""A Plotly chart that stays on the page: each new figure reaches the same element as data and is redrawn
in place with `Plotly.react`.

`st.plotly_chart` identifies its element by the whole figure, so every new step of a walk-through unmounts
the old chart and mounts a new one (Plotly's full setup and a forced layout, each time). This element is
identified by its key alone, so stepping only diffs the figure into the plot already drawn. And a page that
knows the figure a button will bring (Step by step's Next) sends it ahead (`show_upcoming`): the press draws
it before the server has answered.

Plotly itself is copied once into the app's `static/` folder (served by Streamlit's static file serving,
compressed and revalidated by its ETag) and loaded once per browser tab, whichever charts use it: plotly.js's
2-D build (bar, scatter, heatmap and the other 2-D types; 1.5 MB, a third of the full bundle) when setup
fetched it and its SHA-256 is the one pinned here, else the full bundle inside the `plotly` wheel.
"""
from __future__ import annotations

import functools
import hashlib
import json
import shutil
from contextlib import nullcontext
from pathlib import Path

import plotly
import streamlit as st
from plotly.io.json import to_json_plotly

from engine.lesson.bundle import (FULL_BUNDLE, PARTIAL_FOLDER, PARTIAL_SHA256, bundle_name, choose_bundle,
                                  plotly_js_version)

STATIC = Path(__file__).resolve().parent.parent / "static"
DEFAULT_HEIGHT = 450                                     # px, what Streamlit gives a figure with no height


@functools.cache
def plotly_source() -> Path:
    """The bundle to serve: the 2-D build of the wheel's own plotly.js version when it is on disk and whole
    (its SHA-256 as pinned), else the wheel's full bundle (engine.lesson.bundle, which the lesson file shares)."""
    return choose_bundle(FULL_BUNDLE, PARTIAL_FOLDER, PARTIAL_SHA256)


def plotly_file() -> str:
    """The name the bundle is served under: a new plotly.js version or build is a new name (no stale copy)."""
    source = plotly_source()
    name = bundle_name(source, FULL_BUNDLE)
    return name if plotly_js_version(source) else name.replace("unknown", plotly.__version__)


@functools.cache
def publish_plotly() -> Path:
    """Copy the bundle into static/ (once per process, not at every chart of every rerun; a copy of another
    size is replaced)."""
    source = plotly_source()
    target = STATIC / plotly_file()
    if not target.exists() or target.stat().st_size != source.stat().st_size:
        STATIC.mkdir(exist_ok=True)
        partial = target.with_suffix(".part")
        shutil.copyfile(source, partial)
        partial.replace(target)                          # a reader never sees half a file
    return target


# The element: a box Streamlit's own charts' styles and selectors also match, and in it the plot.
# Each run hands the figure (Plotly's JSON) and how to size it; the first call loads Plotly, every call
# redraws with Plotly.react on the same div. A click on a point sends its coordinates as a one-shot trigger.
_HTML = '<div class="stPlotlyChart ds-chart" data-testid="stPlotlyChart"><div class="ds-plot"></div></div>'
# the plot's drawn width must not hold the column open when the window narrows: inline-size containment
_CSS = """
.ds-chart { width: 100%; contain: inline-size; }
.ds-plot { width: 100%; }
"""
_JS = """
const SOURCE = "./app/static/%(file)s";
const PALETTE = ["#0068c9", "#83c9ff", "#ff2b2b", "#ffabab", "#29b09d", "#7defa1", "#ff8700", "#ffd16a",
                 "#6d3fc0", "#d5dae5"];
const GRID = "rgba(49, 51, 63, 0.15)";
const MIN_HEIGHT = 300;
const plotly = () => {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!window.__dsPlotly) {
    window.__dsPlotly = new Promise((done, fail) => {
      const tag = document.createElement("script");
      tag.src = SOURCE; tag.onload = () => done(window.Plotly); tag.onerror = fail;
      document.head.appendChild(tag);
    });
  }
  return window.__dsPlotly;
};

// the figure's layout as this element draws it: as wide as the column, as tall as asked (or as the stage), and in
// the page's look, as Streamlit's own chart theme gives its charts: its font and text colour, its palette, no
// background of its own, margins that grow to fit the axes' labels (figures with narrow margins count on it);
// a figure's explicit settings win. Tick labels are drawn whole, not measured one by one to hide those past
// the plot's edge (Plotly's default for value axes: a layout read per label, a sixth of a redraw).
const layoutOf = (gd, parentElement, spec) => {
  const layout = spec.layout || {};
  layout.height = gd.__dsHeight();
  gd.style.height = layout.height + "px";
  layout.width = gd.clientWidth || undefined;
  const page = getComputedStyle(parentElement);
  const axis = { gridcolor: GRID, zeroline: false, automargin: true, ticklabeloverflow: "allow" };
  layout.template = { layout: { font: { family: page.fontFamily, color: page.color }, colorway: PALETTE,
    paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)", xaxis: axis, yaxis: axis } };
  return layout;
};

// draw a figure (Plotly's JSON text) with Plotly.react on this element's plot; `id` names what is drawn
const draw = (gd, parentElement, figure, id) => {
  const spec = JSON.parse(figure);
  const layout = layoutOf(gd, parentElement, spec);
  const config = Object.assign({ displaylogo: false }, spec.config || {});
  gd.__dsSpec = spec;                               // the figure this element was last given
  gd.__dsDrawn = id;
  gd.__dsDrawing = plotly().then((Plotly) => {
    if (gd.__dsSpec !== spec) return false;         // a newer figure arrived while Plotly loaded
    gd.__dsEvery = 1;                                 // the figure's own labels, all of them
    Plotly.react(gd, spec.data || [], layout, config).then(() => {
      if (gd.__dsSpec === spec && gd.clientWidth <= NARROW) thin(gd);
    });
    return true;
  });
  return gd.__dsDrawing;
};

// On a narrow plot (a phone) the labels of an axis that names every column (tickmode "array": a candidate per
// bar) are drawn over each other into one block: keep every k-th, the smallest k whose labels stand clear of each
// other, measured on the labels drawn (one layout read for all). A wider plot, or a new figure, gets them all back.
const NARROW = 480;                              // a phone's plot; a laptop's (600 px and up) keeps every label
const clear = (a, b) => a.right <= b.left + 1 || b.right <= a.left + 1 || a.bottom <= b.top + 1
  || b.bottom <= a.top + 1;
const namedAxis = (gd) => {
  const axis = ((gd.__dsSpec || {}).layout || {}).xaxis;
  return axis && axis.tickmode === "array" && Array.isArray(axis.tickvals) && Array.isArray(axis.ticktext) ? axis
    : null;
};
const thin = (gd) => {                              // with every label of the figure drawn
  const axis = namedAxis(gd);
  if (!axis || gd.clientWidth > NARROW) return;
  const boxes = [...gd.querySelectorAll(".xaxislayer-above .xtick text")].map((e) => e.getBoundingClientRect());
  let every = 1;
  while (every < boxes.length && !boxes.every((box, i) => i + every >= boxes.length || clear(box, boxes[i + every]))) {
    every += 1;
  }
  if (every === 1) return;
  gd.__dsEvery = every;
  const keep = (_, i) => i %% every === 0;
  window.Plotly.relayout(gd, { "xaxis.tickvals": axis.tickvals.filter(keep),
                               "xaxis.ticktext": axis.ticktext.filter(keep) });
};

// once per plot, after its first drawing: clicks on points, and following the column's (or the stage's) size
const bind = (gd) => {
  gd.__dsBound = true;
  gd.on("plotly_click", (event) => {
    if (!gd.__dsSelect) return;
    gd.__dsTrigger("select", { points: event.points.map((p) => ({
      x: p.x, y: p.y, customdata: p.customdata === undefined ? null : p.customdata,
      curve_number: p.curveNumber, point_index: p.pointIndex })) });
  });
  const follow = () => {
    const width = gd.clientWidth, height = gd.__dsHeight();
    if (!gd.layout || !width || (width === gd.layout.width && height === gd.layout.height)) return;
    gd.style.height = height + "px";
    const update = { width, height }, axis = namedAxis(gd);
    if (axis && gd.__dsEvery > 1) {                   // every label again, thinned anew at the new width
      update["xaxis.tickvals"] = axis.tickvals;
      update["xaxis.ticktext"] = axis.ticktext;
    }
    gd.__dsEvery = 1;
    window.Plotly.relayout(gd, update).then(() => thin(gd));
  };
  gd.__dsWatch = new ResizeObserver(follow);
  gd.__dsWatch.observe(gd);
};

export default function ({ parentElement, data, setTriggerValue }) {
  const gd = parentElement.querySelector(".ds-plot");
  gd.__dsTrigger = setTriggerValue;                 // the latest, for the click handler bound once
  gd.__dsSelect = data.select;
  // in presentation mode's stage the plot is as tall as the box the browser fitted to the window
  const stage = data.stretch ? parentElement.closest('[class*="st-key-stage_fit_"]') : null;
  gd.__dsHeight = () => (stage ? Math.max(stage.clientHeight, MIN_HEIGHT) : data.height);
  // a figure sent ahead for a button (show_upcoming below), drawn when that button is pressed
  gd.__dsShow = (next) => { if (gd.__dsDrawn === next.after) draw(gd, parentElement, next.figure, next.id); };
  // a figure already on the plot (drawn ahead, when its button was pressed) is not drawn again
  const drawn = data.id === gd.__dsDrawn ? gd.__dsDrawing : draw(gd, parentElement, data.figure, data.id);
  drawn.then((done) => {
    if (!done) return;
    if (!gd.__dsBound) bind(gd);
    if (stage && gd.__dsStage !== stage) { gd.__dsStage = stage; gd.__dsWatch.observe(stage); }
  });
}
""" % {"file": plotly_file()}

CHART_NAME = "decodescope_chart"
_chart = st.components.v2.component(CHART_NAME, html=_HTML, css=_CSS, js=_JS, isolate_styles=False)


def figure_data(element) -> dict:
    """The figure a chart element was given, as Plotly's JSON (for tests and tools reading a run's page)."""
    return json.loads(json.loads(element.proto.json)["figure"])


def figure_json(fig) -> str:
    """The figure as the element draws it: without the figure's template, which the element replaces by the
    page's own look (a third of a bar chart's JSON, sent again at every step)."""
    spec = fig.to_dict()              # a copy: the figure itself keeps its template (the HTML export uses it)
    spec["layout"].pop("template", None)
    return to_json_plotly(spec)


def drawing(fig, stretch: bool) -> dict:
    """What the element needs to draw `fig`: its JSON, its height, whether it fills its box, and an id that
    names all three (a figure drawn already, under that id, is not drawn again). Kept on the figure: a
    figure is not changed once drawn, and a page may draw the same one again (Step by step keeps its
    figures from run to run)."""
    kept = fig.__dict__.setdefault("_ds_drawings", {})
    if stretch not in kept:
        figure, height = figure_json(fig), fig.layout.height or DEFAULT_HEIGHT
        named = hashlib.sha256(f"{height}|{stretch}|{figure}".encode()).hexdigest()[:16]
        kept[stretch] = {"figure": figure, "height": height, "stretch": stretch, "id": named}
    return dict(kept[stretch])


def show_figure(fig, key: str, where=None, on_select=None, stretch: bool = False):
    """Draw `fig` in the chart element `key` (in `where`, a container, else here), kept across reruns.

    With on_select="rerun" a click on a point reruns the script and this returns
    {"selection": {"points": [...]}} for that run (each point: x, y, customdata, curve_number,
    point_index), else None. `stretch`: fill the box it is in (presentation mode's stage)."""
    publish_plotly()
    data = drawing(fig, stretch) | {"select": on_select == "rerun"}
    st.session_state.setdefault(_SENT, {})[key] = data["id"]      # what show_upcoming's figure follows
    with where if where is not None else nullcontext():
        result = _chart(key=key, data=data, height="stretch" if stretch else "content",
                        on_select_change=(lambda: None) if on_select == "rerun" else None)
    picked = getattr(result, "select", None) if result is not None else None
    return {"selection": {"points": picked.get("points", [])}} if picked else None


# ---- a figure sent ahead ----------------------------------------------------------------------------------
# The figure a button will bring (Step by step's Next: the step after the one on screen, decoded already) is
# sent before the press; the press draws it at once, and the run the press starts then brings the rest of the
# page and finds the figure drawn. It is drawn only while the chart shows the figure it was sent after (the
# chart's id), so a figure left from an earlier run, or from before new settings, is never drawn.
_SENT = "_ds_chart_sent"                 # session state: chart key -> the id of the figure sent in this session
_UPCOMING_CSS = """
[data-testid="stElementContainer"]:has(.ds-upcoming) {
  display: none;
}
"""
_UPCOMING_JS = """
const EDITABLE = ["INPUT", "TEXTAREA", "SELECT"];
const show = (next) => {
  const button = document.querySelector(next.on);
  const gd = document.querySelector(".st-key-" + next.chart + " .ds-plot");
  // after the button's own handler has sent the press (capture phase: this runs first)
  if (button && !button.disabled && gd && gd.__dsShow) setTimeout(() => gd.__dsShow(next), 0);
};
export default function ({ data }) {
  const sent = (window.__dsUpcoming = window.__dsUpcoming || {});
  sent[data.slot] = data;
  if (!window.__dsUpcomingBound) {
    window.__dsUpcomingBound = true;
    document.addEventListener("click", (event) => {
      for (const next of Object.values(window.__dsUpcoming)) {
        if (next.figure && event.target.closest && event.target.closest(next.on)) show(next);
      }
    }, true);
    // the button's keyboard shortcut, where Streamlit presses it: no modifier, and not typing in a field
    document.addEventListener("keydown", (event) => {
      if (event.ctrlKey || event.metaKey || event.altKey || event.shiftKey || event.repeat) return;
      const path = event.composedPath ? event.composedPath() : [event.target];
      if (path.some((el) => el && (EDITABLE.includes(el.tagName) || el.isContentEditable))) return;
      for (const next of Object.values(window.__dsUpcoming)) {
        if (next.figure && next.key === event.key) show(next);
      }
    }, true);
  }
  return () => { if (sent[data.slot] === data) delete sent[data.slot]; };
}
"""
UPCOMING_NAME = "decodescope_upcoming"
_upcoming = st.components.v2.component(UPCOMING_NAME, html='<div class="ds-upcoming"></div>',
                                       css=_UPCOMING_CSS, js=_UPCOMING_JS, isolate_styles=False)


def show_upcoming(fig, key: str, on: str, shortcut: str = "", stretch: bool = False, slot: str = "next") -> None:
    """After the chart `key` in this run: the figure a press on the button `on` (a CSS selector), or on its
    keyboard `shortcut` (a KeyboardEvent key: "ArrowRight"), will show; None when the press brings none known
    yet. Sent at every run that draws the chart, so that what the browser holds is always this run's (an
    invisible element, one per `slot`: a chart may have a figure ahead for each of several buttons)."""
    data = {"chart": key, "slot": f"{key}_{slot}", "on": on, "key": shortcut,
            "after": st.session_state.get(_SENT, {}).get(key), "figure": None}
    if fig is not None:
        data |= drawing(fig, stretch)
    _upcoming(key=data["slot"], data=data)
