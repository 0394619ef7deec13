// Attach to a running coding-agent worker and print its live transcript and open dialogs.
//
//   npm install && node client.mjs ~/.local/state/coding-agent/sessions/<id>/worker.sock
//
// Everything above the framing is the real @earendil-works/chord 0.87.1: its binding, parsers and
// state decoder. The framing is the coding agent's wire (docs/wire.md): one JSON frame per line,
// and a frame over 8 MiB arrives as a run of {"type":"part"} lines to join.

import net from "node:net";
import {
  RemoteServiceError,
  createRemoteServiceBinding,
  createServiceStateDecoder,
  createServiceSubscribeCall,
  createServiceUnsubscribeCall,
  defineService,
  parseWireServiceProviderUpdate,
  parseWireServiceSubscriptionSnapshot,
} from "@earendil-works/chord";
import { BACKGROUND_CONTEXT } from "@earendil-works/chord/context";

const Conversation = defineService("pi.conversation");
const Approvals = defineService("pi.approval-dialog");
const Questions = defineService("pi.question-dialog");

/** Chord's RemoteServiceTransport over the wire's NDJSON frames. */
function wireTransport(socket) {
  let nextId = 0;
  let nextSubscription = 0;
  const calls = new Map();
  const streams = new Map();
  let buffer = "";
  let parts = null;
  const send = (frame) => socket.write(JSON.stringify(frame) + "\n");
  const request = (call) =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      calls.set(id, { resolve, reject });
      send({ type: "request", id, call });
    });
  const receive = (frame) => {
    if (frame.type === "result") {
      const call = calls.get(frame.id);
      calls.delete(frame.id);
      if (frame.ok) call?.resolve(frame.result);
      else call?.reject(new RemoteServiceError(frame.error.code, frame.error.message));
    } else if (frame.type === "update") {
      const stream = streams.get(frame.subscriptionId);
      if (stream === undefined) return;
      const update = stream.decoder.decodeUpdate(parseWireServiceProviderUpdate(frame.update));
      if (stream.active) stream.listener(update, BACKGROUND_CONTEXT);
      else stream.held.push(update);
    } else if (frame.type === "closed") {
      console.log(`worker closed the connection ${frame.reason}`.trim());
      process.exit(0);
    }
  };
  socket.setEncoding("utf8");
  socket.on("data", (chunk) => {
    buffer += chunk;
    for (let end = buffer.indexOf("\n"); end >= 0; end = buffer.indexOf("\n")) {
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + 1);
      if (line.trim() === "") continue;
      const frame = JSON.parse(line);
      if (frame.type !== "part") receive(frame);
      else if (((parts ??= []).push(frame.data), frame.last)) {
        const whole = parts.join("");
        parts = null;
        receive(JSON.parse(whole));
      }
    }
  });
  return {
    invoke: (call) => request(call),
    async subscribe(serviceId, mode, listener) {
      const id = `s${nextSubscription++}`;
      const stream = { listener, decoder: createServiceStateDecoder(), active: false, held: [] };
      streams.set(id, stream);
      const raw = await request(createServiceSubscribeCall(id, serviceId, mode));
      return {
        snapshot: stream.decoder.decodeSnapshot(parseWireServiceSubscriptionSnapshot(raw)),
        activate() {
          stream.active = true;
          for (const update of stream.held.splice(0)) listener(update, BACKGROUND_CONTEXT);
        },
        async close() {
          streams.delete(id);
          await request(createServiceUnsubscribeCall(id)).catch(() => {});
        },
      };
    },
  };
}

function textOf(entry) {
  const parts = [];
  for (const message of entry.model ?? []) {
    if (typeof message.content === "string") parts.push(message.content);
    else for (const block of message.content ?? []) if (block?.type === "text") parts.push(block.text);
  }
  return parts.join("");
}

const path = process.argv[2];
if (!path) {
  console.error("usage: node client.mjs WORKER_SOCKET");
  process.exit(2);
}
const socket = net.createConnection(path);
await new Promise((resolve, reject) => socket.once("connect", resolve).once("error", reject));
const binding = createRemoteServiceBinding({
  services: [Conversation, Approvals, Questions],
  transport: wireTransport(socket),
  onError: (error) => console.error(`chord: ${error.message}`),
});

const printed = new Set();
binding.observe(Conversation, async (conversation, context) => {
  const stop = conversation.view.subscribe((view) => {
    if (view === undefined || "parent" in view.conversation) return; // the root conversation only
    for (const entry of view.entries) {
      if (printed.has(entry.id)) continue;
      printed.add(entry.id);
      const text = textOf(entry);
      console.log(`[${entry.kind}] ${text || JSON.stringify(entry.data ?? {})}`);
    }
  });
  await new Promise((resolve) => context.abortSignal?.addEventListener("abort", resolve));
  stop();
});
for (const [label, service] of [["approval", Approvals], ["question", Questions]]) {
  binding.observe(service, async (dialog, context) => {
    const request = dialog.request.value;
    console.log(`[dialog open] ${label}: ${JSON.stringify(request)}`);
    await new Promise((resolve) => context.abortSignal?.addEventListener("abort", resolve));
    console.log(`[dialog closed] ${label}: ${request?.name ?? request?.question ?? ""}`);
  });
}
await binding.ready(BACKGROUND_CONTEXT);
console.log(`attached to ${path}`);
socket.on("close", () => process.exit(0));
process.on("SIGTERM", () => process.exit(0));
