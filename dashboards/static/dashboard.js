/* abacus-ray sweep page: selectors, heatmap, diagonal lines, region bars, per-recurrence lines.
 *
 * Data comes from the page's <script type="application/json" id="dashboard-data"> block (built by
 * dashboards/payload.py). User-provided text (run names, config values) reaches the DOM only through
 * textContent, and reaches Plotly only through esc(), which turns it into HTML entities that Plotly
 * shows literally. The selection lives in the URL hash so a reload (live mode) keeps it.
 */
(function () {
  "use strict";

  const block = document.getElementById("dashboard-data");
  if (!block || typeof Plotly === "undefined") return;
  const D = JSON.parse(block.textContent);

  // matplotlib's YlGnBu (yellow = low, dark blue = high), as in the paper's heatmaps (docs/official-code.md §8.1).
  const YLGNBU = [[0, "#ffffd9"], [0.125, "#edf8b1"], [0.25, "#c7e9b4"], [0.375, "#7fcdbb"], [0.5, "#41b6c4"],
                  [0.625, "#1d91c0"], [0.75, "#225ea8"], [0.875, "#253494"], [1, "#081d58"]];
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                   "#bcbd22", "#17becf"];
  const CONFIG = { displaylogo: false, responsive: true };
  const HEATMAP_MAX_SIDE = 200; // longer operands (e.g. a 200..1000 diagonal) are shown by the lines plot only
  const ANNOTATE_MAX_SIDE = 30; // write the percentage into cells of grids up to 30 x 30 (the paper's small plots)

  const byId = new Map(D.entries.map((e) => [e.id, e]));
  const state = { entry: D.entries.length ? D.entries[0].id : null, mode: "model", metric: "accuracy", line: null,
                  cell: null };

  function esc(s) {
    // Plotly reads a few tags (<b>, <a href>, <br>) in text; with '<' escaped none can form.
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }
  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function current() { return byId.get(state.entry); }
  function fixedKey(e) { return [e.dims.task, e.dims.recurrences, e.dims.evalset].join("\u0001"); }

  // ---- state in the URL hash -------------------------------------------------------------------
  function readHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    const e = Number(p.get("e"));
    if (p.has("e") && byId.has(e)) state.entry = e;
    if (p.get("mode") === "mean") state.mode = "mean";
    if (p.get("metric") === "first" && D.has_sort) state.metric = "first";
    if (p.get("line")) state.line = p.get("line");
  }
  function writeHash() {
    const p = new URLSearchParams({ e: state.entry, mode: state.mode, metric: state.metric, line: state.line || "" });
    history.replaceState(null, "", "#" + p.toString());
  }

  // ---- selectors ---------------------------------------------------------------------------------
  const selects = {};
  function choose(dim, value) {
    // The entry with dims[dim] == value that agrees with the current one on the most other selectors.
    const cur = current();
    let best = null, bestScore = -1;
    for (const e of D.entries) {
      if (e.dims[dim] !== value) continue;
      let score = 0;
      for (const d of D.dims) if (d.key !== dim && e.dims[d.key] === cur.dims[d.key]) score += d.key === "run" ? 0.5 : 1;
      if (score > bestScore) { best = e; bestScore = score; }
    }
    if (best) state.entry = best.id;
  }
  function addSelect(parent, id, label, options, value, onChange) {
    const wrap = el("label", { for: id }, label);
    const sel = el("select", { id: id, name: id });
    for (const [v, text] of options) {
      const opt = el("option", { value: v }, text);
      sel.appendChild(opt);
    }
    sel.value = value;
    sel.addEventListener("change", () => onChange(sel.value));
    wrap.appendChild(sel);
    parent.appendChild(wrap);
    return sel;
  }
  function buildControls() {
    const box = document.getElementById("controls");
    if (!box) return;
    addSelect(box, "sel-mode", "Show", [["model", "one model"], ["mean", "mean over seeds"]], state.mode, (v) => {
      state.mode = v; renderAll();
    });
    for (const d of D.dims) {
      selects[d.key] = addSelect(box, "sel-" + d.key, d.label, d.values.map((v) => [v, v]), current().dims[d.key],
        (v) => { choose(d.key, v); renderAll(); });
    }
    if (D.has_sort) {
      addSelect(box, "sel-metric", "Metric", [["accuracy", "exact match"], ["first", "first answer token (min. elem.)"]],
        state.metric, (v) => { state.metric = v; renderAll(); });
    }
    const lineBox = document.getElementById("lines-controls");
    const lineDims = [["run", "run"]].concat(D.varying.filter((k) => ["k", "positions", "arch", "train_len", "variant"].includes(k))
      .map((k) => [k, D.dims.find((d) => d.key === k).label]));
    if (D.dims.find((d) => d.key === "seed").values.length > 1) lineDims.push(["seed", "seed"]);
    if (!state.line || !lineDims.some(([k]) => k === state.line)) state.line = D.varying.includes("k") ? "k" : "run";
    if (lineBox) addSelect(lineBox, "sel-line", "One line per", lineDims, state.line, (v) => { state.line = v; renderAll(); });
  }
  function syncControls() {
    const cur = current();
    for (const d of D.dims) {
      const sel = selects[d.key];
      sel.value = cur.dims[d.key];
      sel.disabled = d.values.length < 2 || (state.mode === "mean" && (d.key === "run" || d.key === "seed"));
    }
  }

  // ---- heatmap -----------------------------------------------------------------------------------
  function axisTitles(task) {
    return task === "sort" ? ["Maximum number of digits", "Length of array to sort"]
      : ["Length of Operand One", "Length of Operand Two"];
  }
  function showEmpty(id, text) {
    const div = document.getElementById(id);
    if (!div) return;
    Plotly.purge(div);
    div.replaceChildren(el("div", { class: "empty" }, text));
  }
  function draw(id, traces, layout) {
    const div = document.getElementById(id);
    if (!div) return;
    for (const old of div.querySelectorAll(":scope > .empty")) old.remove();
    Plotly.react(div, traces, layout, CONFIG);
  }
  function renderHeatmap() {
    const cur = current();
    const mean = state.mode === "mean";
    const grid = D.grids[(mean ? "g" : "e") + (mean ? cur.group : cur.id)];
    const first = state.metric === "first" && grid.first;
    const shown = grid.i.map((i, k) => i <= HEATMAP_MAX_SIDE && grid.j[k] <= HEATMAP_MAX_SIDE);
    const hidden = shown.filter((s) => !s).length;
    if (hidden === grid.i.length) { showEmpty("heatmap", "Every cell lies beyond operand length " + HEATMAP_MAX_SIDE + "; see the diagonal plot."); return; }
    const maxI = Math.max(...grid.i.filter((_, k) => shown[k])), maxJ = Math.max(...grid.j.filter((_, k) => shown[k]));
    const z = [], cd = [];
    for (let r = 0; r < maxI; r++) { z.push(new Array(maxJ).fill(null)); cd.push(new Array(maxJ).fill(null)); }
    for (let k = 0; k < grid.i.length; k++) {
      if (!shown[k]) continue;
      const r = grid.i[k] - 1, c = grid.j[k] - 1;
      z[r][c] = first ? grid.first[k] : grid.acc[k];
      cd[r][c] = [grid.n[k], grid.c[k], first ? grid.first_lo[k] : grid.lo[k], first ? grid.first_hi[k] : grid.hi[k],
                  grid.runs ? grid.runs[k] : 1];
    }
    const [yTitle, xTitle] = axisTitles(cur.task);
    const what = first ? "first token" : "accuracy";
    let hover = `${esc(yTitle)}: %{y}<br>${esc(xTitle)}: %{x}<br>${what}: %{z:.1f}%<br>` +
      "n = %{customdata[0]}" + (mean ? " (pooled)" : "") + ", %{customdata[1]} correct" +
      "<br>95% interval: %{customdata[2]:.1f}–%{customdata[3]:.1f}%";
    if (mean) hover += "<br>runs: %{customdata[4]}";
    const trace = {
      type: "heatmap", z: z, customdata: cd, x: [...Array(maxJ).keys()].map((v) => v + 1),
      y: [...Array(maxI).keys()].map((v) => v + 1), zmin: 0, zmax: 100, colorscale: YLGNBU, hoverongaps: false,
      colorbar: { title: { text: "Accuracy (%)" } }, hovertemplate: hover + "<extra></extra>", xgap: 0, ygap: 0,
    };
    if (Math.max(maxI, maxJ) <= ANNOTATE_MAX_SIDE) {
      trace.texttemplate = "%{z:.0f}";
      trace.textfont = { size: Math.max(6, Math.min(12, Math.floor(220 / Math.max(maxI, maxJ)))) };
    }
    const shapes = [];
    const nI = cur.n_train, nJ = cur.task === "sort" ? cur.n_train_array : cur.n_train;
    if (nI && nJ) {
      shapes.push({ type: "rect", xref: "x", yref: "y", x0: 0.5, y0: 0.5, x1: Math.min(nJ, maxJ) + 0.5,
                    y1: Math.min(nI, maxI) + 0.5, line: { color: "red", width: 2 }, fillcolor: "rgba(0,0,0,0)" });
    }
    const group = D.groups[String(cur.group)];
    let title = mean ? `${esc(group.label)} — mean over ${group.entries.length} run(s)` : `${esc(cur.run)} (${esc(cur.model)})`;
    if (hidden) title += `<br><span style="font-size:11px">${hidden} cell(s) beyond length ${HEATMAP_MAX_SIDE}: see the diagonal plot</span>`;
    const layout = {
      title: { text: title, font: { size: 14 } }, shapes: shapes, margin: { l: 70, r: 20, t: 50, b: 60 },
      xaxis: { title: { text: xTitle }, constrain: "domain", showgrid: false, tick0: 1 },
      yaxis: { title: { text: yTitle }, autorange: "reversed", scaleanchor: "x", constrain: "domain", showgrid: false,
               tick0: 1 },
      plot_bgcolor: "#f0f0f0",
    };
    draw("heatmap", [trace], layout);
    const div = document.getElementById("heatmap");
    if (div && !div.dataset.clicks) {
      div.dataset.clicks = "1";
      div.on("plotly_click", (ev) => {
        const pt = ev.points && ev.points[0];
        if (pt) { state.cell = [pt.y, pt.x]; renderErrors(); }
      });
    }
  }

  // ---- errors in one cell ------------------------------------------------------------------------
  function renderErrors() {
    const cur = current(), grid = D.grids["e" + cur.id], E = grid && grid.errors;
    const example = document.getElementById("errors-example");
    if (!E) {
      showEmpty("errors", "No error analysis in these results (written before results schema 2).");
      if (example) example.textContent = "";
      return;
    }
    let k = -1;
    if (state.cell) k = grid.i.findIndex((i, n) => i === state.cell[0] && grid.j[n] === state.cell[1]);
    if (k < 0) { // default: the cell with the most wrong answers
      let most = -1;
      grid.i.forEach((_, n) => { const w = grid.n[n] - grid.c[n]; if (w > most) { most = w; k = n; } });
    }
    const [yTitle, xTitle] = axisTitles(cur.task);
    const wrong = grid.n[k] - grid.c[k];
    const counts = E.positions[k] || [];
    const classes = ["carry", "length", "other"];
    const title = `${esc(yTitle)} ${grid.i[k]}, ${esc(xTitle)} ${grid.j[k]}: ${wrong} of ${grid.n[k]} wrong — ` +
      classes.map((c) => `${c} ${E[c][k] === null ? "?" : E[c][k]}`).join(", ");
    const traces = [{ type: "bar", x: counts.map((_, p) => p), y: counts, marker: { color: "#d62728" },
                      hovertemplate: "answer position %{x}: %{y} answers first wrong here<extra></extra>" }];
    const layout = { title: { text: title, font: { size: 13 } }, margin: { l: 60, r: 20, t: 50, b: 50 },
                     xaxis: { title: { text: "answer position of the first wrong token (0 = least significant; last = EOS)" },
                              dtick: 1 },
                     yaxis: { title: { text: "wrong answers" }, rangemode: "tozero" } };
    if (!wrong) showEmpty("errors", `Cell ${grid.i[k]} x ${grid.j[k]}: every answer right.`);
    else draw("errors", traces, layout);
    if (example) example.textContent = E.example[k] ? "Example: " + E.example[k] : "";
  }

  // ---- lines on the diagonal ---------------------------------------------------------------------
  function lineMembers() {
    const cur = current(), D1 = state.line;
    const keep = D.entries.filter((e) => fixedKey(e) === fixedKey(cur) && D.diagonals[String(e.id)]);
    if (D1 === "run") return keep.map((e) => [e.run, [e]]);
    const conditions = ["positions", "arch", "k", "train_len", "variant"].filter((k) => k !== D1);
    const sel = keep.filter((e) => conditions.every((k) => e.dims[k] === cur.dims[k]));
    const groups = new Map();
    for (const e of sel) {
      const v = e.dims[D1];
      if (!groups.has(v)) groups.set(v, []);
      groups.get(v).push(e);
    }
    const label = D.dims.find((d) => d.key === D1).label.split(" ")[0];
    return [...groups.entries()].sort((a, b) => (Number(a[0]) - Number(b[0])) || a[0].localeCompare(b[0]))
      .map(([v, es]) => [D1 === "k" ? `k=${v}` : `${label} ${v}`, es]);
  }
  function renderLines() {
    const section = document.getElementById("lines-section");
    const none = !Object.keys(D.diagonals).length || current().task === "sort"; // i = j means nothing for sorting
    if (section) section.hidden = none;
    if (none) return;
    const lines = lineMembers();
    const traces = [];
    const idLengths = new Set();
    lines.forEach(([name, es], n) => {
      const sum = new Map(), cnt = new Map();
      for (const e of es) {
        const dg = D.diagonals[String(e.id)];
        dg.x.forEach((x, k) => {
          sum.set(x, (sum.get(x) || 0) + dg.y[k]); cnt.set(x, (cnt.get(x) || 0) + 1);
        });
        if (e.n_train) idLengths.add(e.n_train);
      }
      const xs = [...sum.keys()].sort((a, b) => a - b);
      const single = es.length === 1 ? D.diagonals[String(es[0].id)] : null;
      traces.push({
        type: "scatter", mode: "lines+markers", name: esc(name) + (es.length > 1 ? ` (mean of ${es.length})` : ""),
        x: xs, y: xs.map((x) => sum.get(x) / cnt.get(x)), line: { color: PALETTE[n % PALETTE.length], width: 2 },
        marker: { size: 4 },
        customdata: single ? single.x.map((x, k) => [single.n[k], single.lo[k], single.hi[k]]) : undefined,
        hovertemplate: "length %{x}: %{y:.1f}%" +
          (single ? "<br>n = %{customdata[0]}, 95% interval %{customdata[1]:.1f}–%{customdata[2]:.1f}%" : "") +
          "<extra>%{fullData.name}</extra>",
      });
    });
    const shapes = [], annotations = [];
    for (const n of idLengths) {
      shapes.push({ type: "line", x0: n, x1: n, y0: 0, y1: 100, yref: "y", line: { color: "red", dash: "dash", width: 1.5 } });
      annotations.push({ x: n, y: 100, yref: "y", text: "In Distribution", showarrow: false, xanchor: "left", yanchor: "top",
                         font: { color: "red", size: 11 } });
    }
    draw("lines", traces, {
      margin: { l: 60, r: 20, t: 20, b: 50 }, shapes: shapes, annotations: annotations,
      xaxis: { title: { text: "Operand Length (i = j)" }, rangemode: "tozero" },
      yaxis: { title: { text: "Exact Match Accuracy (%)" }, range: [0, 102] }, legend: { orientation: "h", y: -0.2 },
    });
  }

  // ---- region bars with per-seed points ----------------------------------------------------------
  function renderBars() {
    const cur = current();
    const key = state.metric === "first" ? "first" : "accuracy";
    const gids = [...new Set(D.entries.filter((e) => fixedKey(e) === fixedKey(cur)).map((e) => e.group))];
    const groups = gids.map((g) => [g, D.groups[String(g)]]);
    const views = D.views[cur.task] || [];
    const traces = [];
    views.forEach(([view, label], n) => {
      const have = groups.filter(([, g]) => g[key][view]);
      if (!have.length) return;
      const color = PALETTE[n % PALETTE.length];
      traces.push({
        type: "bar", name: esc(label), offsetgroup: view, x: have.map(([, g]) => esc(g.label)),
        y: have.map(([, g]) => g[key][view].mean), marker: { color: color },
        text: have.map(([, g]) => g[key][view].mean.toFixed(1)), textposition: "outside",
        customdata: have.map(([, g]) => [g[key][view].std === null ? "–" : g[key][view].std.toFixed(1), g[key][view].runs]),
        hovertemplate: "%{x}<br>" + esc(label) + ": %{y:.1f}% ± %{customdata[0]} over %{customdata[1]} run(s)<extra></extra>",
      });
      const px = [], py = [], pt = [];
      for (const [, g] of have) {
        for (const id of g.entries) {
          const e = byId.get(id);
          const v = e.views[key][view];
          if (v === undefined || v === null) continue;
          px.push(esc(g.label)); py.push(v); pt.push(esc(e.run));
        }
      }
      traces.push({
        type: "scatter", mode: "markers", name: esc(label) + " runs", offsetgroup: view, x: px, y: py, text: pt,
        showlegend: false, marker: { color: "#222", size: 6, symbol: "circle-open" },
        hovertemplate: "%{text}<br>" + esc(label) + ": %{y:.1f}%<extra></extra>",
      });
    });
    if (!traces.length) { showEmpty("bars", "No region means for this selection."); return; }
    draw("bars", traces, {
      barmode: "group", scattermode: "group", margin: { l: 60, r: 20, t: 20, b: 80 }, xaxis: { type: "category" },
      yaxis: { title: { text: "Exact Match Accuracy (%)" }, range: [0, 110] }, legend: { orientation: "h", y: -0.25 },
    });
  }

  // ---- per-recurrence lines (Fig. 15) ------------------------------------------------------------
  function renderRecurrence() {
    if (!D.recurrence.length || !document.getElementById("recurrence")) return;
    const labels = Object.fromEntries(Object.values(D.views).flat());
    const traces = D.recurrence.map((s, n) => ({
      type: "scatter", mode: "lines+markers", name: esc(`${s.run} · ${labels[s.view] || s.view}`), x: s.x, y: s.y,
      line: { color: PALETTE[n % PALETTE.length] }, hovertemplate: "recurrences %{x}: %{y:.1f}%<extra>%{fullData.name}</extra>",
    }));
    draw("recurrence", traces, {
      margin: { l: 60, r: 20, t: 20, b: 50 }, xaxis: { title: { text: "Test-time recurrences" }, dtick: 1 },
      yaxis: { title: { text: "Exact Match Accuracy (%)" }, range: [0, 102] }, legend: { orientation: "h", y: -0.2 },
    });
  }

  // ---- the search: each trial's validation over steps (ASHA-stopped dotted), the best so far -----------
  function renderSearch() {
    const S = D.search;
    if (!S || !S.trials.length || !document.getElementById("search")) return;
    const traces = S.trials.map((t, n) => ({
      type: "scatter", mode: "lines+markers", name: esc(`${t.run} (${t.status})`), x: t.x, y: t.y,
      line: { color: t.status === "finished" ? PALETTE[n % PALETTE.length] : "#9aa1ad",
              dash: t.status === "finished" ? "solid" : "dot" },
      hovertemplate: "step %{x}: %{y:.1f}%<extra>%{fullData.name}</extra>",
    }));
    draw("search", traces, {
      margin: { l: 60, r: 20, t: 20, b: 50 }, xaxis: { title: { text: "Optimiser step" } },
      yaxis: { title: { text: "Validation exact match (%)" }, range: [0, 102] }, showlegend: false,
    });
    draw("search-best", [{
      type: "scatter", mode: "lines+markers", line: { shape: "hv", color: PALETTE[2] }, name: "best so far",
      x: S.best_so_far.map((b) => b.trial), y: S.best_so_far.map((b) => b.best),
      text: S.best_so_far.map((b) => esc(b.run)), hovertemplate: "after %{x} trials: %{y:.1f}%<br>%{text}<extra></extra>",
    }], {
      margin: { l: 60, r: 20, t: 20, b: 50 }, xaxis: { title: { text: "Trials tried" }, dtick: 1 },
      yaxis: { title: { text: "Best validation so far (%)" }, range: [0, 102] },
    });
  }

  // ---- the timeline: which node ran which trial when (traces built by dashboards/timeline.py) ----------
  function renderTimeline() {
    const C = D.timeline;
    if (!C || !C.traces.length) return;
    draw("timeline", C.traces, C.layout);
  }

  // ---- live mode: reload when the server rebuilt from new Parquet parts -------------------------
  function live() {
    if (!/^https?:$/.test(location.protocol)) return;
    const badge = el("div", { id: "live" }, "live: watching results");
    document.body.appendChild(badge);
    setInterval(() => {
      fetch("stamp.json", { cache: "no-store" }).then((r) => r.json()).then((s) => {
        if (s.stamp && s.stamp !== D.stamp) location.reload();
      }).catch(() => { badge.textContent = "live: server unreachable"; });
    }, 5000);
  }

  function renderAll() {
    syncControls();
    writeHash();
    renderHeatmap();
    renderErrors();
    renderLines();
    renderBars();
    renderRecurrence();
    renderSearch();
    renderTimeline();
  }

  if (state.entry === null) return;
  readHash();
  buildControls();
  renderAll();
  live();
  document.body.dataset.rendered = "1";
})();
