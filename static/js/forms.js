// Behaviour that pages used to inline (the Content-Security-Policy allows no inline script):
//   <form data-confirm="Question?">   asks before submitting;
//   <select data-autosubmit>          submits its form when changed;
//   <button data-use-earliest>        picks "later" and copies the earliest start into the form;
//   [data-shape-field="gpus|nodes"]   shown only while the form's `shape` radio says so.
(function () {
  "use strict";
  function showShape(form) {
    var chosen = form.querySelector("[name=shape]:checked");
    if (!chosen) return;
    form.querySelectorAll("[data-shape-field]").forEach(function (field) {
      field.hidden = field.getAttribute("data-shape-field") !== chosen.value;
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("form").forEach(showShape);
  });
  document.addEventListener("change", function (event) {
    if (event.target.name === "shape" && event.target.form) showShape(event.target.form);
  });
  document.addEventListener("submit", function (event) {
    var question = event.target.getAttribute && event.target.getAttribute("data-confirm");
    if (question && !window.confirm(question)) event.preventDefault();
  });
  document.addEventListener("change", function (event) {
    if (event.target.hasAttribute && event.target.hasAttribute("data-autosubmit")) {
      event.target.form.submit();
    }
  });
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-use-earliest]");
    if (!button) return;
    var form = button.form;
    form.querySelector("[name=start][value=later]").checked = true;
    form.starts_at.value = form.earliest.value;
  });
})();
