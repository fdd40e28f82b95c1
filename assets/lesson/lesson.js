/* A DecodeScope lesson: steps through a recorded run. Reads the lesson's JSON from its own script tag, puts every
   text from it on the page with textContent (never as HTML), and redraws one Plotly chart per step. */
(function () {
  "use strict";
  window.lessonScriptStart = performance.now();    // plotly.js is loaded (bench/bench_lesson.py reads both)
  var L = JSON.parse(document.getElementById("lesson-data").textContent);
  var V = L.view, steps = V.steps, N = steps.length;
  var lang = L.texts[L.lang] ? L.lang : "en";
  var at = 0, timer = null, drawn = false;
  var FONT = getComputedStyle(document.body).fontFamily;
  var RAW = "#4c78a8", SHAPED = "#f58518", CUT = "rgba(150,150,150,0.45)", CHOSEN = "#e45756",
      CUMULATIVE = "#54a24b", THRESHOLD = "#b279a2", EDGE = "rgba(128,128,128,0.55)",
      EDGE_PRUNED = "rgba(128,128,128,0.2)";
  var LABEL = 20, LABEL_PHONE = 12;
  var X2_TOP = 1.05, BACKDROP = "rgba(255,255,255,0.85)";   // the cumulative axis's end; a label's backing
  var STRIP = 150;                        // px of the strip under the chart (rounds, or Z per step)     // characters of a token's text on the chart's axis
  var $ = function (id) { return document.getElementById(id); };

  // English nouns after a count, and their singular: "1 tokens kept" reads "1 token kept" (as the app says it)
  var SINGULAR = {tokens: "token", steps: "step", beams: "beam", candidates: "candidate", rounds: "round"};
  function T(key, values) {
    var english = !L.texts[lang][key] || lang === "en";
    var text = L.texts[lang][key] || L.texts.en[key] || key;
    if (english && values) {
      text = text.replace(/\{(\w+)\} ([a-z]+)/g, function (whole, name, noun) {
        var one = values[name] === 1 || values[name] === "1";
        return one && SINGULAR[noun] ? "{" + name + "} " + SINGULAR[noun] : whole;
      });
    }
    return text.replace(/\{(\w+)\}/g, function (whole, name) {
      return values && values[name] !== undefined ? String(values[name]) : whole;
    });
  }
  // a token as the app shows it: whitespace visible (the trace already writes byte pieces as <0xE4>)
  function visible(text) {
    if (text === "") return "\u2205";
    return text.replace(/ /g, "\u2423").replace(/\r\n|\n|\r/g, "\u23ce").replace(/\t/g, "\u21e5");
  }
  // Plotly reads a small HTML subset in tick and hover texts: a token such as <b> must stay literal
  function plain(text) {
    return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }
  // a label at most `limit` characters (code points), then an ellipsis; the hover has it whole
  function short(text, limit) {
    var chars = Array.from(text);
    return chars.length <= limit ? text : chars.slice(0, limit - 1).join("") + "\u2026";
  }
  // the widest of these labels in px, at the chart's font: the left margin, worked out here because Plotly's
  // automargin draws every chart twice (half of each step's time)
  var ruler = document.createElement("canvas").getContext("2d");
  function widest(labels, size) {
    ruler.font = size + "px " + FONT;
    return labels.reduce(function (w, text) { return Math.max(w, ruler.measureText(text).width); }, 0);
  }
  function plainLabel(text) { return text.replace(/<br>/g, " "); }
  function fmt(x, digits) { return x === null || x === undefined ? "\u2212\u221e" : x.toFixed(digits); }
  function put(id, text) { $(id).textContent = text; }
  function narrow() { return window.innerWidth < 760; }

  // ---- the beam tree's paths --------------------------------------------------------------------------------
  var byId = {};
  if (V.tree) V.tree.nodes.forEach(function (n) { byId[n[0]] = n; });
  function pathTo(id) {               // node ids from the first generated token down to id (the root left out)
    var path = [], node = byId[id], guard = 0;
    while (node && node[1] !== null && guard++ <= V.tree.nodes.length) { path.push(node[0]); node = byId[node[1]]; }
    return path.reverse();
  }
  function beamPath(s) {              // the best running beam after step s; the best sequence after the last
    if (s === N - 1 && V.tree.best.length) return V.tree.best;
    var beams = steps[s].beams || [];
    return beams.length ? pathTo(beams[0]) : [];
  }

  // ---- speculative decoding: where each step's token came from -----------------------------------------------
  var origin = [];
  (V.rounds || []).forEach(function (r, i) {
    var pos = r.first, kept = 0;
    r.drafts.forEach(function (d) {
      if (d[3] === "kept") { origin[pos++] = {round: i, kind: "kept_draft", q: d[1], p: d[2]}; kept += 1; }
    });
    if (r.next) origin[pos] = {round: i, kind: r.next[1]};
    r.kept = kept;
  });
  var grammar = steps.some(function (st) { return st.grammar; });
  var strip = V.rounds ? "rounds" : (grammar ? "z" : null);

  // ---- the words around the chart ---------------------------------------------------------------------------
  function strategyLine() {
    var c = V.config, own = L.texts[lang]["strategy_" + c.strategy] || L.texts.en["strategy_" + c.strategy];
    var parts = [own || c.strategy];
    if (c.strategy === "beam") {
      parts.push(T("setting_beams", {n: c.num_beams}), T("setting_length_penalty", {v: c.length_penalty}));
    }
    if (c.warped) {
      if (c.temperature !== 1) parts.push(T("setting_temperature", {v: c.temperature}));
      if (c.top_k > 0) parts.push("top-k " + c.top_k);
      if (c.top_p < 1) parts.push("top-p " + c.top_p);
      if (c.min_p > 0) parts.push("min-p " + c.min_p);
    }
    return parts.join(", ");
  }
  function staticTexts() {
    document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
    var title = L.title || T("title_default");
    put("title", title);
    document.title = title;
    put("subtitle", T("subtitle", {model: V.model, strategy: strategyLine()}));
    put("back", T("back"));
    put("next", T("next"));
    put("play", timer ? T("pause") : T("play"));
    put("prompt-head", T("prompt"));
    put("prompt", V.prompt);
    put("text-head", V.kind === "beam" ? T("best_so_far") : T("text_so_far"));
    put("note-head", T("note"));
    put("keys", T("keys"));
    $("slider").setAttribute("aria-label", T("slider"));
    $("languages").setAttribute("aria-label", T("language"));
    var bundle = T(L.bundle.build === "cartesian" ? "bundle_cartesian" : "bundle_full", {version: L.bundle.version});
    put("footer", T("footer", {model: V.model, bundle: bundle}));
    document.querySelectorAll("#languages button").forEach(function (b) {
      b.setAttribute("aria-pressed", String(b.getAttribute("data-lang") === lang));
    });
  }

  function showText(s) {
    var box = $("text"), tokens;
    if (V.kind === "beam") tokens = beamPath(s).map(function (id) { return byId[id][3]; });
    else tokens = steps.slice(0, s + 1).map(function (st) { return st.chosen_text; });
    box.textContent = "";
    tokens.forEach(function (token, i) {
      var span = document.createElement(i === tokens.length - 1 ? "mark" : "span");
      span.textContent = token;
      box.appendChild(span);
    });
    box.scrollTop = box.scrollHeight;   // the new token in view, without scrolling the page
  }

  function rank(st, i) { return st.rank ? st.rank[i] : i + 1; }     // ranks 1..n are not written out
  function fact(text) {
    var li = document.createElement("li");
    li.textContent = text;
    $("facts").appendChild(li);
  }
  function showFacts(s) {
    var st = steps[s];
    $("facts").textContent = "";
    if (V.kind === "beam") {
      var count = {kept: 0, pruned: 0, finished: 0};
      V.tree.nodes.forEach(function (n) { if (n[2] === s && count[n[4]] !== undefined) count[n[4]] += 1; });
      fact(T("beam_line", count));
    } else {
      var i = st.ids.indexOf(st.chosen);
      fact(i < 0 ? T("chosen_unlisted", {token: visible(st.chosen_text)})
        : T("chosen_line", {token: visible(st.texts[i]), rank: rank(st, i), p: fmt(st.p[i], 4)}));
      fact(T("entropy_line", {h: fmt(st.entropy, 3), hs: fmt(st.shaped_entropy, 3)}));
      if (V.config.warped) fact(T("kept_line", {kept: st.kept_count.toLocaleString()}));
      var from = origin[s];
      if (from) {
        var r = V.rounds[from.round];
        fact(T("round_line", {round: from.round + 1, drafted: r.drafts.length, kept: r.kept}));
        fact(from.kind === "kept_draft" ? T("origin_kept", {q: fmt(from.q, 4), p: fmt(from.p, 4)})
          : T(from.kind === "bonus" ? "origin_bonus" : "origin_corrected"));
      }
      (st.stages || []).forEach(function (g) {
        fact(T("stage_line", {stage: T("stage_" + g[0], {v: g[1]}), kept: g[2].toLocaleString(),
                              mass: fmt(g[3], 4), token: visible(g[4]), p: fmt(g[5], 4)}));
      });
      if (st.grammar) {
        fact(T("grammar_line", {allowed: st.grammar.allowed.toLocaleString(), z: fmt(st.grammar.z, 4)}));
        if (st.grammar.forced) fact(T("forced_line"));
      }
    }
    var note = L.notes[String(s + 1)];
    $("note-box").hidden = !note;
    put("note", note || "");
  }

  // ---- the charts -------------------------------------------------------------------------------------------
  function chartHeight(rows) {
    var top = $("chart").getBoundingClientRect().top + window.scrollY;
    var room = window.innerHeight - top - 12 - (strip ? STRIP : 0);
    if (narrow()) return Math.max(320, Math.min(520, 110 + 30 * rows));
    return Math.max(360, Math.min(room, 150 + 34 * rows));
  }
  function base(height) {
    return {height: height, font: {family: FONT, size: 13}, dragmode: false, hovermode: "closest",
            paper_bgcolor: "#fff", plot_bgcolor: "#fff"};
  }

  function candidatesFigure(s) {
    var st = steps[s], cap = narrow() ? 10 : 20, pos = [], ticks = [], hover = [], idx = [];
    var listed = st.ids.indexOf(st.chosen), cum = [], total = 0, notes = [], chosen = -1;
    for (var j = 0; j < Math.min(st.ids.length, cap); j++) idx.push(j);
    if (listed >= cap) idx[cap - 1] = listed;                     // a chosen token from far down the list stays in view
    var n = idx.length;
    var labels = [];
    idx.forEach(function (k, i) {
      pos.push(i);
      if (k === listed) chosen = i;
      labels.push(rank(st, k) + ". " + short(visible(st.texts[k]), narrow() ? LABEL_PHONE : LABEL));
      ticks.push(plain(labels[i]));
      hover.push("<b>" + plain(visible(st.texts[k])) + "</b> (id " + st.ids[k] + ")<br>" + T("raw") + ": " +
                 fmt(st.p[k], 4) + "<br>" + T("shaped") + ": " + fmt(st.q[k], 4));
      total += st.p[k];
      cum.push(Math.min(total, 1));
    });
    var pick = function (column) { return idx.map(function (k) { return column[k]; }); };
    var raw = pick(st.p), shaped = pick(st.q), kept = pick(st.kept);
    var outline = {color: CHOSEN, width: pos.map(function (i) { return i === chosen ? 3 : 0; })};
    var data = [
      {type: "bar", orientation: "h", y: pos, x: raw, name: T("raw"), hovertext: hover, hoverinfo: "text",
       marker: {color: kept.map(function (k) { return k ? RAW : CUT; }), line: outline}},
      {type: "bar", orientation: "h", y: pos, x: shaped, name: T("shaped"), hovertext: hover,
       hoverinfo: "text", marker: {color: kept.map(function (k) { return k ? SHAPED : CUT; }), line: outline}},
      {type: "scatter", x: cum, y: pos, xaxis: "x2", mode: "lines+markers", name: T("cumulative"),
       line: {color: CUMULATIVE, width: 2}, marker: {size: 5}, hoverinfo: "x+name"}];
    data[0].showlegend = data[1].showlegend = false;
    // the legend's swatches, in the bars' own colours (a legend takes the first bar's, grey when it was cut)
    [["raw", RAW], ["shaped", SHAPED]].concat(kept.indexOf(0) >= 0 ? [["cut", CUT]] : []).forEach(function (entry) {
      data.push({type: "bar", orientation: "h", x: [null], y: [null], name: T(entry[0]), marker: {color: entry[1]},
                 hoverinfo: "skip"});
    });
    // the top-p threshold on the cumulative axis, as the app draws it: with a temperature, the label says that
    // top-p cuts the temperature-scaled curve, not the raw one drawn here (on a phone, under the chart: beside
    // the line it would cover the candidates' names)
    var caveat = "";
    if (V.config.warped && V.config.top_p < 1) {
      var p = V.config.top_p, label = T("threshold", {p: p});
      if (V.config.temperature !== 1) {
        caveat = T("threshold", {p: p}) + T("after_temperature");
        if (!narrow()) label = caveat;
      }
      data.push({type: "scatter", x: [p, p], y: [-0.5, n - 0.5], xaxis: "x2", mode: "lines", name: plainLabel(label),
                 line: {color: THRESHOLD, dash: "dash", width: 2}, hoverinfo: "name", showlegend: false});
      notes.push({x: p, y: n - 0.5, xref: "x2", yref: "y", text: label, showarrow: false, xanchor: "right",
                  yanchor: "bottom", align: "right", font: {size: 12}, bgcolor: BACKDROP});
    }
    var top = Math.max.apply(null, raw.concat(shaped)), xmax = top * 1.3 + 1e-9;
    if (chosen >= 0) {
      // "◀ chosen" right of its bar; where the cumulative curve passes there, right of the curve's point instead
      var end = Math.max(raw[chosen], shaped[chosen]) / xmax, curve = cum[chosen] / X2_TOP;
      var room = (narrow() ? 90 : 80) / Math.max(window.innerWidth * (narrow() ? 0.75 : 0.6), 1);
      var past = curve >= end - 0.02 && curve <= end + room, left = past && curve + room > 0.98;
      notes.push({x: past ? cum[chosen] : Math.max(raw[chosen], shaped[chosen]), y: chosen, xref: past ? "x2" : "x",
                  yref: "y", xanchor: left ? "right" : "left", xshift: left ? -9 : (past ? 9 : 6), showarrow: false,
                  bgcolor: BACKDROP,
                  text: '<span style="color:' + CHOSEN + '">\u25c0</span> ' + T("chosen")});
    }
    var layout = base(chartHeight(n));
    layout.title = {text: T("chart_title", {step: s + 1, n: n}), x: 0, xanchor: "left", font: {size: 15},
                    yref: "container", y: 1, yanchor: "top", pad: {t: 8}};
    layout.barmode = "group";
    layout.bargap = 0.25;
    layout.annotations = notes;
    // on a phone the legend takes a row an entry, under the axis title: the bottom margin holds them all
    var rows = data.filter(function (d) { return d.showlegend !== false; }).length;
    layout.margin = {l: Math.ceil(widest(labels, 13)) + 16, r: 16, t: 96, b: narrow() ? 70 + 21 * rows : 84};
    if (narrow()) layout.height += 21 * rows - 50;
    layout.yaxis = {tickmode: "array", tickvals: pos, ticktext: ticks, autorange: "reversed"};
    // room right of the longest bar for the chosen mark
    layout.xaxis = {title: {text: T("x_axis"), standoff: 8}, range: [0, xmax]};
    // the cumulative raw probability's own axis, titled as the app titles it, in the curve's colour
    layout.xaxis2 = {overlaying: "x", side: "top", range: [0, X2_TOP], showgrid: false,
                     tickvals: [0, 0.25, 0.5, 0.75, 1], tickfont: {color: CUMULATIVE},
                     title: {text: T("x2_axis"), font: {color: CUMULATIVE, size: 13}, standoff: 4}};
    layout.legend = {orientation: "h", x: 0, xanchor: "left", yref: "container", y: 0, yanchor: "bottom"};
    return {data: data, layout: layout, note: narrow() ? caveat : ""};
  }

  function treeFigure(s) {
    var path = beamPath(s), onPath = {}, shown = V.tree.nodes.filter(function (n) { return n[2] <= s; });
    path.forEach(function (id) { onPath[id] = true; });
    var lines = {kept: [[], []], pruned: [[], []], best: [[], []]}, groups = {kept: [], pruned: [], finished: []};
    var maxStep = 0, rows = [0];
    V.tree.nodes.forEach(function (n) { maxStep = Math.max(maxStep, n[2]); rows.push(n[7]); });
    shown.forEach(function (n) {
      if (n[1] === null) return;
      var parent = byId[n[1]], kind = onPath[n[0]] ? "best" : (n[4] === "pruned" ? "pruned" : "kept");
      lines[kind][0].push(parent[2] + 1, n[2] + 1, null);
      lines[kind][1].push(parent[7], n[7], null);
      if (groups[n[4]]) groups[n[4]].push(n);
    });
    var data = [
      {type: "scatter", mode: "lines", x: lines.pruned[0], y: lines.pruned[1], line: {color: EDGE_PRUNED, width: 1},
       hoverinfo: "skip", showlegend: false},
      {type: "scatter", mode: "lines", x: lines.kept[0], y: lines.kept[1], line: {color: EDGE, width: 1.5},
       hoverinfo: "skip", showlegend: false},
      {type: "scatter", mode: "lines", x: lines.best[0], y: lines.best[1], line: {color: CHOSEN, width: 4},
       name: T("best"), hoverinfo: "skip"}];
    // every kept and finished node named on a wide screen; on a phone only the best path, shorter, which still
    // reads as the text the search is heading for
    var phone = narrow(), labelled = maxStep < 24;
    function nodeLabel(n) {
      if (!labelled || (phone && !onPath[n[0]])) return "";
      return plain(short(visible(n[3]), phone ? 6 : 9));
    }
    [["kept", "circle", 11, 1, "#4c78a8"], ["pruned", "circle", 7, 0.35, "#999"],
     ["finished", "diamond", 14, 1, "#f58518"]].forEach(function (style) {
      var group = groups[style[0]], text = labelled && style[0] !== "pruned";
      data.push({type: "scatter", mode: text ? "markers+text" : "markers", name: T(style[0]),
                 x: group.map(function (n) { return n[2] + 1; }), y: group.map(function (n) { return n[7]; }),
                 text: group.map(nodeLabel),
                 textposition: group.map(function (n) { return n[2] % 2 ? "bottom center" : "top center"; }),
                 cliponaxis: false, textfont: {size: phone ? 10 : 11},
                 marker: {symbol: style[1], size: style[2], opacity: style[3], color: style[4],
                          line: {width: 1, color: "#555"}},
                 hovertext: group.map(function (n) {
                   return "<b>" + plain(visible(n[3])) + "</b><br>" + T("tree_x") + " " + (n[2] + 1) + " \u00b7 " +
                          T(n[4]) + "<br>cum logprob " + fmt(n[5], 3) + "<br>score " + fmt(n[6], 3);
                 }), hoverinfo: "text"});
    });
    data.push({type: "scatter", mode: "markers+text", x: [0], y: [0], text: [T("root")], textposition: "bottom right",
               marker: {symbol: "square", size: 12, color: "#888"}, hoverinfo: "skip", showlegend: false,
               cliponaxis: false});
    var low = Math.min.apply(null, rows), high = Math.max.apply(null, rows);
    var layout = base(chartHeight(Math.max(8, (high - low + 1) * 0.9)));
    layout.title = {text: T("tree_title", {beams: V.config.num_beams, step: s + 1}), x: 0, xanchor: "left",
                    font: {size: 15}};
    layout.margin = {l: 20, r: 20, t: 60, b: 84};
    layout.xaxis = {title: {text: T("tree_x")}, range: [-0.5, maxStep + 1.7], dtick: maxStep > 20 ? 5 : 1,
                    zeroline: false};
    layout.yaxis = {range: [high + 0.9, low - 0.9], visible: false};
    layout.legend = {orientation: "h", x: 0, xanchor: "left", yref: "container", y: 0, yanchor: "bottom"};
    return {data: data, layout: layout};
  }

  // one bar per step: where its token came from (speculative), or Z and whether the grammar forced it
  function stripFigure(s) {
    var groups = strip === "rounds"
      ? [["kept_draft", "#54a24b"], ["corrected", "#4c78a8"], ["bonus", "#eeca3b"]]
      : [["free", "#4c78a8"], ["forced", "#b279a2"]];
    var data = groups.map(function (g) {
      var x = [], y = [];
      steps.forEach(function (st, i) {
        var kind = strip === "rounds" ? (origin[i] || {}).kind : (st.grammar && st.grammar.forced ? "forced" : "free");
        if (kind === g[0]) { x.push(i + 1); y.push(strip === "rounds" ? 1 : (st.grammar ? st.grammar.z : null)); }
      });
      return {type: "bar", x: x, y: y, width: 0.85, name: T(g[0]), marker: {color: g[1]}, hoverinfo: "x+y+name"};
    });
    var layout = base(STRIP);
    layout.title = {text: T(strip === "rounds" ? "strip_rounds" : "strip_z"), x: 0, xanchor: "left",
                    font: {size: 13}};
    layout.margin = {l: 40, r: 10, t: 30, b: 24};
    layout.bargap = 0.15;
    layout.barmode = "overlay";
    layout.xaxis = {range: [0.5, N + 0.5], dtick: N > 20 ? 5 : 1};
    layout.yaxis = {range: [0, 1.05], visible: strip !== "rounds", tickvals: [0, 0.5, 1]};
    layout.legend = {orientation: "h", x: 1, xanchor: "right", y: 1.02, yanchor: "bottom", font: {size: 11}};
    layout.shapes = [{type: "rect", xref: "x", yref: "paper", x0: s + 0.5, x1: s + 1.5, y0: 0, y1: 1,
                      line: {color: CHOSEN, width: 2}}];
    return {data: data, layout: layout};
  }

  function draw(s) {
    var fig;
    if (V.kind === "beam") fig = treeFigure(s);
    else if (steps[s].ids.length) fig = candidatesFigure(s);
    else fig = {data: [], layout: Object.assign(base(240), {title: {text: T("no_candidates")}})};
    var done = Plotly.react("chart", fig.data, fig.layout, {displayModeBar: false, responsive: true,
                                                              scrollZoom: false});
    put("chart-note", fig.note || "");
    $("chart-note").hidden = !fig.note;
    if (strip) {
      var small = stripFigure(s);
      $("strip").hidden = false;
      Plotly.react("strip", small.data, small.layout, {displayModeBar: false, responsive: true, scrollZoom: false});
    }
    if (!drawn) {
      drawn = true;
      Promise.resolve(done).then(function () { window.lessonFirstChart = performance.now(); });
    }
  }

  // ---- stepping ---------------------------------------------------------------------------------------------
  function go(s) {
    at = Math.max(0, Math.min(N - 1, s));
    $("slider").value = String(at + 1);
    put("where", T("step_of", {step: at + 1, n: N}));
    $("back").disabled = at === 0;
    $("next").disabled = at === N - 1;
    showText(at);
    showFacts(at);
    draw(at);
  }
  function stop() {
    if (timer) { clearInterval(timer); timer = null; }
    put("play", T("play"));
  }
  function play() {
    if (timer) { stop(); return; }
    if (at === N - 1) go(0);
    timer = setInterval(function () { if (at >= N - 1) stop(); else go(at + 1); }, 1200);
    put("play", T("pause"));
  }
  $("back").addEventListener("click", function () { stop(); go(at - 1); });
  $("next").addEventListener("click", function () { stop(); go(at + 1); });
  $("play").addEventListener("click", play);
  $("slider").addEventListener("input", function () { stop(); go(parseInt(this.value, 10) - 1); });
  document.addEventListener("keydown", function (e) {
    var tag = e.target && e.target.tagName;
    if (tag === "INPUT" || e.altKey || e.ctrlKey || e.metaKey) return;   // the slider steps itself
    if (e.key === "ArrowRight") { stop(); go(at + 1); }
    else if (e.key === "ArrowLeft") { stop(); go(at - 1); }
    else if (e.key === "Home") { stop(); go(0); }
    else if (e.key === "End") { stop(); go(N - 1); }
    else if (e.key === " " && tag !== "BUTTON") play();
    else return;
    e.preventDefault();
  });
  var touchX = null;
  $("reading").addEventListener("touchstart", function (e) { touchX = e.changedTouches[0].clientX; },
                                {passive: true});
  $("reading").addEventListener("touchend", function (e) {
    if (touchX === null) return;
    var dx = e.changedTouches[0].clientX - touchX;
    touchX = null;
    if (Math.abs(dx) > 50) { stop(); go(at + (dx < 0 ? 1 : -1)); }
  });
  document.querySelectorAll("#languages button").forEach(function (b) {
    b.addEventListener("click", function () {
      lang = b.getAttribute("data-lang");
      staticTexts();
      go(at);
    });
  });
  var width = window.innerWidth;
  window.addEventListener("resize", function () {   // a phone turned: the chart's rows follow the width
    if ((window.innerWidth < 760) !== (width < 760)) go(at);
    width = window.innerWidth;
  });

  $("slider").max = String(Math.max(N, 1));
  staticTexts();
  if (N) go(0);
})();
