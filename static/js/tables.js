// Tables on narrow screens.
//   <table class="stack">  folds into one block per row below 640 px, each cell led by its
//                          column's header (data-label, copied here from the thead);
//   .table-wrap            a labelled region that scrolls sideways where a table is still
//                          wider than the screen, and only then takes keyboard focus.
// Without script a table keeps its columns and its .table-wrap scrolls.
(function () {
  "use strict";
  function columnNames(table) {
    var head = table.tHead && table.tHead.rows[0];
    var names = [];
    if (!head) return names;
    Array.prototype.forEach.call(head.cells, function (th) {
      for (var i = 0; i < th.colSpan; i++) names.push(th.textContent.trim());
    });
    return names;
  }
  function stack(table) {
    var names = columnNames(table);
    Array.prototype.forEach.call(table.tBodies, function (body) {
      Array.prototype.forEach.call(body.rows, function (row) {
        var column = 0;
        Array.prototype.forEach.call(row.cells, function (cell) {
          if (cell.tagName === "TD" && cell.colSpan === 1 && names[column] && !cell.hasAttribute("data-label")) {
            cell.setAttribute("data-label", names[column]);
          }
          column += cell.colSpan;
        });
      });
    });
    table.setAttribute("data-stacked", "");
  }
  function focusWhenScrolling() {
    document.querySelectorAll(".table-wrap").forEach(function (wrap) {
      if (wrap.scrollWidth > wrap.clientWidth + 1) wrap.setAttribute("tabindex", "0");
      else if (!wrap.hasAttribute("data-always-focusable")) wrap.removeAttribute("tabindex");
    });
  }
  function prepare(root) {
    root.querySelectorAll("table.stack").forEach(stack);
    focusWhenScrolling();
  }
  document.addEventListener("DOMContentLoaded", function () { prepare(document); });
  document.addEventListener("htmx:afterSettle", function (event) { prepare(event.target); });
  window.addEventListener("resize", focusWhenScrolling);
})();
