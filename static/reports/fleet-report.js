// Fleet chart on the staff usage dashboard.
(function () {
  "use strict";
  const el = document.getElementById("fleet-chart");
  const data = JSON.parse(document.getElementById("fleet-data").textContent);
  if (!el || !window.Chart) return;
  const series = (key, color, label, dash) => ({
    label, borderColor: color, backgroundColor: color, pointRadius: 0, borderWidth: 1.5,
    borderDash: dash || [], data: data.map((r) => ({ x: Date.parse(r.t), y: r[key] })),
  });
  const axis = window.anchorgpuTimeAxis;
  const tick = axis.format(el.dataset.tz, { day: "numeric", month: "short", hour: "2-digit", minute: "2-digit" });
  const first = data.length ? Date.parse(data[0].t) : 0;
  const last = data.length ? Date.parse(data[data.length - 1].t) : 0;
  new Chart(el, {
    type: "line",
    data: { datasets: [series("total", "#94a3b8", el.dataset.total),
                       series("reporting", "#94a3b8", el.dataset.reporting, [4, 4]),
                       series("allocated", "#0f3d5e", el.dataset.allocated),
                       series("busy", "#0f7b6c", el.dataset.busy)] },
    options: { animation: false, parsing: false, responsive: true, maintainAspectRatio: false,
      scales: { x: { type: "linear", min: first, max: last, afterBuildTicks: axis.ticks(el.dataset.tz), ticks: { callback: tick } },
                y: { min: 0 } } },
  });
})();
