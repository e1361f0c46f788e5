// Runs a workflow through @ag-ui/client's HttpAgent against the project's agui/ endpoint,
// then resumes it with the answer given, and prints what the client saw as JSON.
// The client verifies the event order itself (verifyEvents): a stream it refuses makes
// runAgent reject, and this script exit 1 with the client's message.
//
// usage: node run_agent.mjs <endpoint url> <API token> <input JSON> <answer JSON>
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const [url, token, input, answer] = process.argv.slice(2);

function recorder() {
  const seen = { events: [], outcome: null, result: null, error: null };
  const subscriber = {
    onEvent({ event }) {
      seen.events.push(event.type);
    },
    onRunFinishedEvent({ event }) {
      seen.outcome = event.outcome ?? null;
      seen.result = event.result ?? null;
    },
    onRunErrorEvent({ event }) {
      seen.error = { code: event.code ?? null, message: event.message };
    },
  };
  return { seen, subscriber };
}

const agent = new HttpAgent({ url, headers: { Authorization: `Token ${token}` } });
const first = recorder();
await agent.runAgent({ forwardedProps: JSON.parse(input) }, first.subscriber);

const interrupts = first.seen.outcome?.interrupts ?? [];
const responses = Object.fromEntries(
  interrupts.map((interrupt) => [
    interrupt.id,
    {
      status: "resolved",
      payload: JSON.parse(answer),
      metadata: { actionFingerprint: interrupt.metadata?.actionFingerprint },
    },
  ]),
);
const second = recorder();
await agent.runAgent({ resume: buildResumeArray(interrupts, responses) }, second.subscriber);

process.stdout.write(
  JSON.stringify({ threadId: agent.threadId, interrupts, first: first.seen, second: second.seen }),
);
