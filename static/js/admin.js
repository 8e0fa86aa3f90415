// The admin's tables fold like ours on a phone (js/tables.js, css/tables.css): a change
// list and each tabular inline become table.stack inside a labelled, scrollable region.
(function () {
  "use strict";
  var title = document.querySelector("#content h1");
  document.querySelectorAll("#result_list, .inline-group .tabular table").forEach(function (table) {
    var group = table.closest(".inline-group");
    var heading = (group && group.querySelector("h2")) || title;
    var wrap = table.closest(".results, .tabular") || table.parentElement;
    table.classList.add("stack");
    wrap.classList.add("table-wrap");
    wrap.setAttribute("role", "region");
    wrap.setAttribute("aria-label", heading ? heading.textContent.trim() : document.title);
  });
})();
