// The decision page of an approval gate: while a person edits the proposed arguments,
// list what differs from the proposal, so the edit is seen before it is submitted.
document.addEventListener("DOMContentLoaded", function () {
  "use strict";
  const args = document.getElementById("gate-args");
  const diff = document.getElementById("gate-diff");
  if (!args || !diff) return;
  const proposal = JSON.parse(args.dataset.proposal);
  const prefix = args.dataset.prefix + "-";
  const body = diff.querySelector("tbody");

  function proposed(name) {
    let value = proposal;
    for (const key of name.slice(prefix.length).split("__")) {
      if (value === null || typeof value !== "object" || !(key in value)) return undefined;
      value = value[key];
    }
    return value;
  }

  function shown(value) {
    if (value === undefined || value === null || value === "") return "(none)";
    return typeof value === "string" ? value : JSON.stringify(value);
  }

  function current(input) {
    if (input.type === "checkbox") return input.checked;
    if (input.tagName === "SELECT") {
      try { return input.value === "" ? undefined : JSON.parse(input.value); } catch (e) { return input.value; }
    }
    if (input.type === "number") return input.value === "" ? undefined : Number(input.value);
    return input.value;
  }

  function update() {
    body.replaceChildren();
    for (const input of args.querySelectorAll("input[name], select[name], textarea[name]")) {
      if (!input.name.startsWith(prefix)) continue;
      const before = proposed(input.name), after = current(input);
      if (shown(before) === shown(after)) continue;
      const row = body.insertRow();
      row.insertCell().textContent = input.name.slice(prefix.length).replaceAll("__", ".");
      row.insertCell().textContent = shown(before);
      row.insertCell().textContent = shown(after);
    }
    diff.hidden = body.rows.length === 0;
  }

  args.addEventListener("input", update);
  args.addEventListener("change", update);
  update();
});
