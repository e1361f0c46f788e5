// Deadlines count down: every <time class="hitl-deadline"> shows the time left, live.
"use strict";
(function () {
  function format(ms) {
    const s = Math.floor(Math.abs(ms) / 1000);
    const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600);
    const m = Math.floor((s % 3600) / 60), sec = s % 60;
    const clock = [h, m, sec].map((n) => String(n).padStart(2, "0")).join(":");
    return (d ? d + "d " : "") + clock;
  }
  function tick() {
    document.querySelectorAll("time.hitl-deadline").forEach(function (el) {
      const left = Date.parse(el.getAttribute("datetime")) - Date.now();
      el.textContent = left >= 0 ? "in " + format(left) : "overdue by " + format(left);
      el.classList.toggle("overdue", left < 0);
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    tick();
    setInterval(tick, 1000);
  });
})();
