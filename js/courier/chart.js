// The last benchmark runs as a horizontal bar chart (median seconds, whiskers from min to max), in SVG.
const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attributes, text) {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  if (text !== undefined) element.textContent = text;
  return element;
}

/** runs: [{workflow, device, stats: {median, min, max}}], newest first. */
export function benchmarkChart(runs, { width = 300, barHeight = 16, labelHeight = 12 } = {}) {
  const rows = runs.filter((run) => typeof run.stats?.median === "number");
  const rowHeight = labelHeight + barHeight + 6;
  const height = rows.length * rowHeight;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", class: "courier-chart",
                             role: "img", "aria-label": "benchmark medians" });
  const longest = Math.max(...rows.map((run) => run.stats.max ?? run.stats.median), 1e-9);
  const scale = (seconds) => (seconds / longest) * (width - 60);
  rows.forEach((run, index) => {
    const top = index * rowHeight;
    const { median, min = median, max = median } = run.stats;
    const title = `${run.workflow} on ${run.device}`;
    chart.append(
      svg("text", { x: 0, y: top + labelHeight - 2, "font-size": 10, fill: "currentColor" },
          title.length > 48 ? `${title.slice(0, 47)}…` : title),
      svg("rect", { x: 0, y: top + labelHeight, width: Math.max(scale(median), 1), height: barHeight,
                    fill: "#4a8cff" }),
      svg("line", { x1: scale(min), x2: scale(max), y1: top + labelHeight + barHeight / 2,
                    y2: top + labelHeight + barHeight / 2, stroke: "currentColor" }),
      svg("text", { x: scale(median) + 4, y: top + labelHeight + barHeight - 4, "font-size": 10,
                    fill: "currentColor" }, `${median.toFixed(2)} s`),
    );
  });
  return chart;
}
