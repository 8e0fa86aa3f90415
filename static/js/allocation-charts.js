// Per-GPU charts on the allocation page; refreshed every 15 s without reloading the page.
(function () {
  "use strict";
  const root = document.getElementById("charts");
  if (!root || !window.Chart) return;
  const palette = ["#0f7b6c", "#0f3d5e", "#c2410c", "#7c3aed", "#0891b2", "#be123c", "#4d7c0f", "#a16207"];
  const specs = [
    ["chart-util", "util", { min: 0, max: 100 }],
    ["chart-mem", "mem", { min: 0 }],
    ["chart-power", "power", { min: 0 }],
    ["chart-temp", "temp", {}],
  ];
  const axis = window.anchorgpuTimeAxis;
  const hours = axis.format(root.dataset.tz, { hour: "2-digit", minute: "2-digit" });
  const days = axis.format(root.dataset.tz, { day: "numeric", month: "short", hour: "2-digit", minute: "2-digit" });
  const charts = {};
  for (const [id, , y] of specs) {
    charts[id] = new Chart(document.getElementById(id), {
      type: "line",
      data: { datasets: [] },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false, parsing: false, normalized: true,
        scales: { x: { type: "linear", afterBuildTicks: axis.ticks(root.dataset.tz), ticks: { callback: hours } }, y },
        plugins: { legend: { position: "bottom", labels: { boxWidth: 10 } } },
        elements: { point: { radius: 0 }, line: { borderWidth: 1.5 } },
      },
    });
  }
  async function refresh() {
    const response = await fetch(root.dataset.url, { headers: { Accept: "application/json" } });
    if (!response.ok) return;
    const data = await response.json();
    const long = Date.parse(data.to) - Date.parse(data.from) > 86400000;
    const tick = long ? days : hours;
    for (const [id, field] of specs) {
      // The axis spans the range asked for, so a gap in the samples shows as a gap.
      charts[id].options.scales.x.min = Date.parse(data.from);
      charts[id].options.scales.x.max = Date.parse(data.to);
      charts[id].options.scales.x.ticks.callback = tick;
      const datasets = data.gpus.map((gpu, i) => ({
        label: root.dataset.gpu + " " + gpu.index,
        borderColor: palette[i % palette.length],
        backgroundColor: palette[i % palette.length],
        data: gpu.points.filter((p) => p[field] !== null).map((p) => ({ x: Date.parse(p.t), y: p[field] })),
      }));
      if (field === "mem" && data.gpus.length) {
        const totals = data.gpus[0].points.filter((p) => p.mem_total !== null);
        datasets.push({ label: root.dataset.total, borderDash: [4, 4], borderColor: "#94a3b8",
          data: totals.map((p) => ({ x: Date.parse(p.t), y: p.mem_total })) });
      }
      charts[id].data.datasets = datasets;
      charts[id].update();
    }
    root.dataset.points = String(data.gpus.reduce((n, g) => n + g.points.length, 0));
    root.dataset.source = data.source;
    // Which data the lines are drawn from, and why the engine's are not, where it is the source.
    const note = document.getElementById("chart-source");
    if (note) {
      const words = [note.dataset[data.source] || ""];
      if (data.engine_from) words.push(note.dataset.engineBefore);
      if (data.engine_fallback) {
        const unreachable = data.engine_fallback.reason === "unreachable";
        words.unshift(unreachable ? note.dataset.fallbackUnreachable : note.dataset.fallbackNoData);
      }
      note.textContent = words.join(" ");
    }
  }
  refresh();
  // Raw samples arrive every scrape; minute and hourly points (read from the engine, or
  // rolled up) gain one a minute at most, so a long range is read again once a minute.
  let readAt = Date.now();
  setInterval(() => {
    if (root.dataset.source !== "raw" && Date.now() - readAt < 60000) return;
    readAt = Date.now();
    refresh();
  }, 15000);
  window.addEventListener("anchorgpu:refresh", refresh);
})();
