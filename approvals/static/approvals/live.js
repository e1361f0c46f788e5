// The decision page follows its question's live feed (docs/approvals.md): once the question
// is no longer this person's to answer (answered by someone else, cancelled, expired,
// handed over) it says so in a status banner and disables the page's submit buttons, so a
// stale form is never sent. No reload.
// Loaded in the page's head (the admin's media): it starts once the page is parsed.
document.addEventListener("DOMContentLoaded", function () {
  "use strict";
  const banner = document.getElementById("hitl-live");
  if (!banner || !banner.dataset.events || !window.EventSource) return;
  const source = new EventSource(banner.dataset.events);
  let isStale = false;

  function stale(message) {
    isStale = true;
    banner.textContent = message;
    banner.hidden = false;
    document
      .querySelectorAll("#content-main form [type=submit], #content-main form button:not([type])")
      .forEach((button) => {
        button.disabled = true;
      });
  }

  // Enter in a field would still send the form: a stale form is not sent at all.
  document.addEventListener(
    "submit",
    (event) => {
      if (isStale) event.preventDefault();
    },
    true,
  );

  source.addEventListener("question", (event) => {
    const state = JSON.parse(event.data);
    if (!state.answerable) stale(state.message);
  });
  source.addEventListener("end", () => source.close());
});
