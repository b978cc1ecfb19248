/* abacus-ray "Paper vs ours": per figure, the paper's value beside ours as paired bars.
 *
 * Data comes from the page's <script type="application/json" id="dashboard-data"> block (built by
 * dashboards/site.py: {paper_bars: {figure id: {x, paper, relation, ours, lo, hi, runs}}}). Labels are
 * config values, so they reach Plotly only through esc(), which Plotly shows literally.
 */
(function () {
  "use strict";

  const block = document.getElementById("dashboard-data");
  if (!block || typeof Plotly === "undefined") return;
  const D = JSON.parse(block.textContent);

  function esc(s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  for (const [fig, b] of Object.entries(D.paper_bars || {})) {
    const node = document.getElementById("paper-" + fig);
    if (!node || !b.x.length) continue;
    const x = b.x.map(esc);
    const paper = {
      type: "bar", name: "paper", x: x, y: b.paper, marker: { color: "#7f7f7f" },
      text: b.relation.map((r, k) => (r === ">=" ? "≥ " : "") + b.paper[k]),
      hovertemplate: "%{x}<br>paper: %{text} %<extra></extra>",
    };
    const ours = {
      type: "bar", name: "ours", x: x, y: b.ours, marker: { color: "#1f77b4" },
      error_y: { type: "data", symmetric: false,
                 array: b.ours.map((v, k) => (b.hi[k] === null ? 0 : b.hi[k] - v)),
                 arrayminus: b.ours.map((v, k) => (b.lo[k] === null ? 0 : v - b.lo[k])) },
      customdata: b.ours.map((v, k) => [b.lo[k], b.hi[k], b.runs[k]]),
      hovertemplate: "%{x}<br>ours: %{y:.1f} % (95 %: %{customdata[0]:.1f}–%{customdata[1]:.1f}), "
                     + "%{customdata[2]} run(s)<extra></extra>",
    };
    Plotly.newPlot(node, [paper, ours], {
      barmode: "group", margin: { t: 10, r: 10, b: 120, l: 50 }, height: 360,
      yaxis: { title: "exact match %", range: [0, 105] }, xaxis: { automargin: true },
      legend: { orientation: "h", y: 1.08 },
    }, { displaylogo: false, responsive: true });
  }
  document.body.dataset.rendered = "1";
})();
