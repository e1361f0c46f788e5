// The demo's example agent chat (hitl_site/chat.py): each AG-UI run is a POST whose answer
// is read as Server-Sent Events, one AG-UI event per `data:` line. A run that stops on
// questions ends with RUN_FINISHED's interrupt outcome; the answer goes back as the next
// run's `resume` on the same thread.
(() => {
  const root = document.querySelector(".hitl-chat");
  if (!root) return;
  const log = document.getElementById("chat-log");
  const threadId = uuid();
  let snapshot = {};

  function uuid() {
    // crypto.randomUUID needs a secure context; getRandomValues does not.
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    const hex = [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  function say(text, kind) {
    const item = document.createElement("li");
    item.className = kind || "";
    item.textContent = text;
    log.append(item);
    return item;
  }

  async function run(fields) {
    const body = {
      threadId, runId: uuid(), state: {}, messages: [], tools: [], context: [],
      forwardedProps: {}, ...fields,
    };
    const response = await fetch(root.dataset.endpoint, {
      method: "POST",
      credentials: "same-origin",
      headers: {
        "Content-Type": "application/json",
        Accept: "text/event-stream",
        "X-CSRFToken": root.dataset.csrf,
      },
      body: JSON.stringify(body),
    });
    if (!response.ok) {
      const refused = await response.json().catch(() => ({}));
      say(`Refused (${response.status}): ${refused.detail || response.statusText}`, "error");
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let pending = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      pending += decoder.decode(value, { stream: true });
      let end;
      while ((end = pending.indexOf("\n\n")) >= 0) {
        const block = pending.slice(0, end);
        pending = pending.slice(end + 2);
        const data = block.split("\n").filter((l) => l.startsWith("data:"))
          .map((l) => l.slice(5).trim()).join("\n");
        if (data) handle(JSON.parse(data));
      }
    }
  }

  function handle(event) {
    switch (event.type) {
      case "STEP_STARTED":
        say(`… ${event.stepName}`, "step");
        break;
      case "STATE_SNAPSHOT":
        snapshot = event.snapshot || {};
        break;
      case "RUN_FINISHED": {
        const outcome = event.outcome || { type: "success" };
        if (outcome.type === "interrupt") {
          outcome.interrupts.forEach(ask);
        } else if (outcome.type === "cancelled") {
          say("The workflow was cancelled.", "agent");
        } else if ((snapshot.waiting_on_others || []).length) {
          say("Waiting on others to answer; ask again later (the same thread resumes).", "agent");
        } else {
          say(`Done: ${JSON.stringify(event.result)}`, "agent");
        }
        break;
      }
      case "RUN_ERROR":
        say(`Refused (${event.code}): ${event.message}`, "error");
        break;
      default:
        break;
    }
  }

  // A form from the interrupt's responseSchema: a checkbox per boolean, a list per enum,
  // a number field per number, a text field otherwise.
  function ask(interrupt) {
    const item = say(interrupt.message, "question");
    item.dataset.interrupt = interrupt.id;
    const needs = (interrupt.metadata && interrupt.metadata.needs) || [];
    const page = interrupt.metadata && interrupt.metadata.links && interrupt.metadata.links.page;
    if (needs.length) {
      const note = document.createElement("p");
      note.textContent = `This chat cannot carry ${needs.join(" and ")}: answer on the decision page. `;
      if (page) {
        const link = Object.assign(document.createElement("a"), { href: page, textContent: "Open it" });
        note.append(link);
      }
      item.append(note);
      return;
    }
    const form = document.createElement("form");
    const schema = interrupt.responseSchema || {};
    for (const [name, property] of Object.entries(schema.properties || {})) {
      const row = document.createElement("p");
      const label = Object.assign(document.createElement("label"), { textContent: `${property.title || name} ` });
      let input;
      if (property.enum) {
        input = document.createElement("select");
        property.enum.forEach((choice) => input.append(new Option(String(choice), JSON.stringify(choice))));
      } else {
        input = document.createElement("input");
        input.type = property.type === "boolean" ? "checkbox"
          : ["number", "integer"].includes(property.type) ? "number" : "text";
      }
      input.name = name;
      input.dataset.type = property.enum ? "enum" : property.type;
      label.append(input);
      row.append(label);
      form.append(row);
    }
    form.append(Object.assign(document.createElement("input"), { type: "submit", value: "Answer" }));
    form.addEventListener("submit", async (submitted) => {
      submitted.preventDefault();
      const payload = {};
      for (const input of form.querySelectorAll("[name]")) {
        const type = input.dataset.type;
        if (type === "boolean") payload[input.name] = input.checked;
        else if (type === "enum") payload[input.name] = JSON.parse(input.value);
        else if (input.value === "") continue;
        else payload[input.name] = ["number", "integer"].includes(type) ? Number(input.value) : input.value;
      }
      form.querySelector("[type=submit]").disabled = true;
      say(`You: ${JSON.stringify(payload)}`, "you");
      const metadata = { actionFingerprint: interrupt.metadata && interrupt.metadata.actionFingerprint };
      await run({ resume: [{ interruptId: interrupt.id, status: "resolved", payload, metadata }] });
    });
    item.append(form);
  }

  const start = document.getElementById("chat-start");
  if (start) {
    start.addEventListener("submit", async (submitted) => {
      submitted.preventDefault();
      const input = {
        employee: start.employee.value,
        amount: Number(start.amount.value),
        purpose: start.purpose.value,
      };
      say(`You: an expense of ${input.amount} for ${input.employee} (${input.purpose})`, "you");
      await run({ forwardedProps: input });
    });
  }
})();
