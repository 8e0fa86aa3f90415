// Time axes of the Chart.js line charts (a linear scale over epoch milliseconds): ticks at
// whole hours or days, labelled in the reader's language and time zone like every other
// time on the page.
(function () {
  "use strict";
  const HOUR = 3600000;
  const STEPS = [1, 2, 3, 6, 12, 24, 48, 168, 336].map((h) => h * HOUR);
  // the smallest step that puts at most ten ticks over `span` milliseconds
  const step = (span) => STEPS.find((s) => span / s <= 10) || STEPS[STEPS.length - 1];
  window.anchorgpuTimeAxis = {
    // an x scale's `afterBuildTicks`: ticks at the multiples of the step (whole UTC hours or
    // days) between the scale's ends; Chart.js's own `stepSize` only suggests a unit
    ticks: (scale) => {
      const s = step(scale.max - scale.min);
      scale.ticks = [];
      for (let v = Math.ceil(scale.min / s) * s; v <= scale.max; v += s) scale.ticks.push({ value: v });
    },
    format: (timeZone, parts) => new Intl.DateTimeFormat(document.documentElement.lang,
      { timeZone, hourCycle: "h23", ...parts }).format,
  };
})();
