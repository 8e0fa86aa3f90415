// Behaviour that pages used to inline (the Content-Security-Policy allows no inline script):
//   <form data-confirm="Question?">   asks before submitting;
//   <select data-autosubmit>          submits its form when changed;
//   <button data-use-earliest>        picks "later" and copies the earliest start into the form;
//   [data-shown-when="shape=nodes"]   shown only while the form's radio `shape` is `nodes`
//                                     (without script, every such field shows);
//   <button data-copy="#id">          copies that element's text, and says so.
(function () {
  "use strict";
  function showChosen(form) {
    form.querySelectorAll("[data-shown-when]").forEach(function (field) {
      var rule = field.getAttribute("data-shown-when").split("=");
      var chosen = form.querySelector("[name='" + rule[0] + "']:checked");
      if (chosen) field.hidden = chosen.value !== rule[1];
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("form").forEach(showChosen);
  });
  document.addEventListener("change", function (event) {
    if (event.target.type === "radio" && event.target.form) showChosen(event.target.form);
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
    var button = event.target.closest && event.target.closest("[data-copy]");
    if (!button) return;
    var source = document.querySelector(button.getAttribute("data-copy"));
    if (!source || !navigator.clipboard) return;
    navigator.clipboard.writeText(source.textContent.trim()).then(function () {
      var label = button.textContent;
      button.textContent = button.getAttribute("data-copied") || label;
      setTimeout(function () { button.textContent = label; }, 2000);
    });
  });
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-use-earliest]");
    if (!button) return;
    var form = button.form;
    form.querySelector("[name=start][value=later]").checked = true;
    form.starts_at.value = form.earliest.value;
    showChosen(form);
  });
})();
