// Time axes of the Chart.js line charts (a linear scale over epoch milliseconds): ticks at
// whole hours or days, labelled in the reader's language and time zone like every other
// time on the page.
(function () {
  "use strict";
  const HOUR = 3600000;
  const STEPS = [1, 2, 3, 6, 12, 24, 48, 168, 336].map((h) => h * HOUR);
  window.anchorgpuTimeAxis = {
    // the smallest step that puts at most ten ticks over `span` milliseconds
    step: (span) => STEPS.find((s) => span / s <= 10) || STEPS[STEPS.length - 1],
    format: (timeZone, parts) => new Intl.DateTimeFormat(document.documentElement.lang,
      { timeZone, hourCycle: "h23", ...parts }).format,
  };
})();
