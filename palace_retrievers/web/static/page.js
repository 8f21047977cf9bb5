// The memory page works without JavaScript; this only saves a click or two.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // Filters apply as soon as a select changes.
  for (const form of document.querySelectorAll("form[data-autosubmit]")) {
    for (const select of form.querySelectorAll("select")) {
      select.addEventListener("change", () => form.submit());
    }
  }
  // "/" focuses the page's search box, as on most sites.
  const box = document.querySelector("input[type=search]");
  document.addEventListener("keydown", (event) => {
    const typing = ["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement.tagName);
    if (box && event.key === "/" && !typing) {
      event.preventDefault();
      box.focus();
    }
  });
  // A button whose form is being sent cannot send it twice.
  for (const form of document.querySelectorAll("form[method=post]")) {
    form.addEventListener("submit", () => {
      for (const button of form.querySelectorAll("button")) button.disabled = true;
    });
  }
});
