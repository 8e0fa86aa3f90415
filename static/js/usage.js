// Fleet chart on the staff usage dashboard.
(function () {
  "use strict";
  const el = document.getElementById("fleet-chart");
  const data = JSON.parse(document.getElementById("fleet-data").textContent);
  if (!el || !window.Chart) return;
  const series = (key, color, label) => ({
    label, borderColor: color, backgroundColor: color, pointRadius: 0, borderWidth: 1.5,
    data: data.map((r) => ({ x: Date.parse(r.t), y: r[key] })),
  });
  new Chart(el, {
    type: "line",
    data: { datasets: [series("total", "#94a3b8", el.dataset.total || "total"),
                       series("allocated", "#0f3d5e", "allocated"), series("busy", "#0f7b6c", "busy")] },
    options: { animation: false, parsing: false,
      scales: { x: { type: "linear", ticks: { callback: (v) => new Date(v).toISOString().slice(5, 13).replace("T", " ") } },
                y: { min: 0 } } },
  });
})();
