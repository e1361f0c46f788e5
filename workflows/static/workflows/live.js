// The invocation monitor follows the invocation's live stream (docs/agents.md): when a node
// run changes status or the invocation ends, it fetches its own page again and swaps its
// monitor sections (graph, node runs, events) in place: no reload.
(function () {
  "use strict";
  const script = document.currentScript;
  if (!script || !script.dataset.stream || !window.EventSource) return;
  const source = new EventSource(script.dataset.stream);
  let due = null;

  function refresh() {
    due = null;
    fetch(window.location.href, { credentials: "same-origin" })
      .then((response) => (response.ok ? response.text() : Promise.reject(response.status)))
      .then((html) => {
        const fresh = new DOMParser().parseFromString(html, "text/html");
        const now = document.querySelectorAll(".hitl-monitor");
        const next = fresh.querySelectorAll(".hitl-monitor");
        if (now.length !== next.length) return;
        now.forEach((section, index) => section.replaceWith(document.adoptNode(next[index])));
        document.dispatchEvent(new Event("hitl:monitor-updated"));
      })
      .catch(() => {}); // the next change tries again
  }

  function soon() {
    if (due === null) due = window.setTimeout(refresh, 150);
  }

  source.addEventListener("node_run", soon);
  source.addEventListener("end", () => {
    source.close();
    soon();
  });
})();
