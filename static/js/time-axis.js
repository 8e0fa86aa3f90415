// Time axes of the Chart.js line charts (a linear scale over epoch milliseconds): ticks at
// whole hours or days of the reader's time zone, labelled in their language, like every
// other time on the page.
(function () {
  "use strict";
  const HOUR = 3600000;
  const STEPS = [1, 2, 3, 6, 12, 24, 48, 168, 336].map((h) => h * HOUR);
  // the smallest step that puts at most ten ticks over `span` milliseconds
  const step = (span) => STEPS.find((s) => span / s <= 10) || STEPS[STEPS.length - 1];

  // How far the zone's wall clock is ahead of UTC at instant `t`, in milliseconds.
  function offset(timeZone, t) {
    const parts = {};
    new Intl.DateTimeFormat("en-US", { timeZone, hourCycle: "h23", year: "numeric",
      month: "numeric", day: "numeric", hour: "numeric", minute: "numeric", second: "numeric" })
      .formatToParts(t).forEach((p) => { parts[p.type] = Number(p.value); });
    const wall = Date.UTC(parts.year, parts.month - 1, parts.day, parts.hour, parts.minute, parts.second);
    return wall - Math.floor(t / 1000) * 1000;
  }

  window.anchorgpuTimeAxis = {
    // An x scale's `afterBuildTicks` for a zone: ticks where the zone's clock shows a
    // multiple of the step (14:00, 15:00 … or midnights), between the scale's ends.
    // Chart.js's own `stepSize` only suggests a unit.
    ticks: (timeZone) => (scale) => {
      const s = step(scale.max - scale.min);
      scale.ticks = [];
      let wall = Math.ceil((scale.min + offset(timeZone, scale.min)) / s) * s;
      for (;; wall += s) {
        // the zone's offset where the tick falls: it differs from the start's across DST
        const v = wall - offset(timeZone, wall - offset(timeZone, scale.min));
        if (v > scale.max) break;
        if (v >= scale.min) scale.ticks.push({ value: v });
      }
    },
    format: (timeZone, parts) => new Intl.DateTimeFormat(document.documentElement.lang,
      { timeZone, hourCycle: "h23", ...parts }).format,
  };
})();
