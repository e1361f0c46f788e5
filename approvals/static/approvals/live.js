// The decision page follows its question's live feed (docs/approvals.md): once the question
// is no longer this person's to answer (answered by someone else, cancelled, expired,
// handed over) it says so in a status banner and disables the page's submit buttons, so a
// stale form is never sent. No reload.
(function () {
  "use strict";
  const banner = document.getElementById("hitl-live");
  if (!banner || !banner.dataset.events || !window.EventSource) return;
  const source = new EventSource(banner.dataset.events);

  function stale(message) {
    banner.textContent = message;
    banner.hidden = false;
    document
      .querySelectorAll("#content-main form button[type=submit], #content-main form input[type=submit]")
      .forEach((button) => {
        button.disabled = true;
      });
  }

  source.addEventListener("question", (event) => {
    const state = JSON.parse(event.data);
    if (!state.answerable) stale(state.message);
  });
  source.addEventListener("end", () => source.close());
})();
