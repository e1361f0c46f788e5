// Names each cell of a list table after its column (data-label), so that below 768 px the
// rows show as cards, "state live", with the header row hidden (lists.css, monitor.css).
(function () {
  "use strict";
  function label(table) {
    const head = table.tHead && table.tHead.rows[0];
    if (!head) return;
    const names = Array.from(head.cells, (th) => th.textContent.trim());
    for (const body of table.tBodies) {
      for (const row of body.rows) {
        Array.from(row.cells).forEach((cell, index) => {
          if (names[index] && cell.colSpan === 1 && !cell.dataset.label) {
            cell.dataset.label = names[index];
          }
        });
      }
    }
  }
  function labelAll() {
    document
      .querySelectorAll("table.hitl-table, body.app-workflows #result_list")
      .forEach(label);
  }
  document.addEventListener("DOMContentLoaded", labelAll);
  document.addEventListener("hitl:monitor-updated", labelAll); // live.js swapped the tables
})();
