// A real @earendil-works/chord 0.87.1 peer for the interop tests (tests/interop/).
//
// It speaks our wire (docs/wire.md: NDJSON frames, `part` runs for large frames) over Unix sockets
// and hands everything above the framing to Chord itself: its parsers
// (parseWireServiceSubscriptionSnapshot, parseWireServiceProviderUpdate), its state decoder and
// encoder, createRemoteServiceBinding, RemoteServiceProvider and createRemoteServiceEndpoint.
//
// Usage: node chord_peer.mjs consumer|provider SOCKET_PATH
// Commands arrive as JSON lines on stdin and every command gets one JSON line on stdout.
//   consumer: attach, check {expect}, call {value}, stale, detach — Chord's binding against our server
//   provider: new, step {ops}, — a Chord provider served on SOCKET_PATH to our binding

import net from "node:net";
import readline from "node:readline";
import {
  RemoteServiceError,
  RemoteServiceProvider,
  createRemoteServiceBinding,
  createRemoteServiceEndpoint,
  createServiceStateDecoder,
  createServiceStateEncoder,
  createServiceSubscribeCall,
  createServiceUnsubscribeCall,
  decodeServiceControlCall,
  defineService,
  parseServiceCall,
  parseWireServiceProviderUpdate,
  parseWireServiceSubscriptionSnapshot,
  replicatedState,
} from "@earendil-works/chord";
import { BACKGROUND_CONTEXT } from "@earendil-works/chord/context";

const MAX_FRAME = 8 * 1024 * 1024;
const PART = 1024 * 1024;
const Single = defineService("interop.single");
const Keyed = defineService("interop.keyed");

// -- framing -------------------------------------------------------------------------------------

export function frameLines(frame) {
  const text = JSON.stringify(frame);
  if (Buffer.byteLength(text) <= MAX_FRAME) return text + "\n";
  // A frame over the limit goes as a run of part frames (pieces of its JSON text).
  let out = "";
  const step = Math.floor((PART - 48) / 8); // characters: at most 4 bytes each, doubled by escaping
  for (let i = 0; i < text.length; ) {
    let end = Math.min(i + step, text.length);
    const code = text.charCodeAt(end - 1);
    if (end < text.length && code >= 0xd800 && code < 0xdc00) end -= 1; // keep a pair whole
    out += JSON.stringify({ type: "part", data: text.slice(i, end), last: end >= text.length }) + "\n";
    i = end;
  }
  return out;
}

export function frameReader(socket, onFrame) {
  let buffer = "";
  let parts = null;
  socket.setEncoding("utf8");
  socket.on("data", (chunk) => {
    buffer += chunk;
    let newline;
    while ((newline = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + 1);
      if (line.trim() === "") continue;
      const frame = JSON.parse(line);
      if (frame.type === "part") {
        (parts ??= []).push(frame.data);
        if (!frame.last) continue;
        const whole = JSON.parse(parts.join(""));
        parts = null;
        onFrame(whole);
      } else {
        if (parts !== null) throw new Error("a frame interrupted a run of part frames");
        onFrame(frame);
      }
    }
  });
}

function canonical(value) {
  if (Array.isArray(value)) return "[" + value.map(canonical).join(",") + "]";
  if (value !== null && typeof value === "object") {
    return "{" + Object.keys(value).sort().map((k) => JSON.stringify(k) + ":" + canonical(value[k])).join(",") + "}";
  }
  return JSON.stringify(value);
}

// -- consumer: Chord's binding over our client framing ------------------------------------------

class WireTransport {
  constructor(socket, onChange) {
    this.socket = socket;
    this.onChange = onChange;
    this.nextId = 0;
    this.nextSubscription = 0;
    this.pending = new Map();
    this.streams = new Map();
    this.closed = false;
    frameReader(socket, (frame) => this.#receive(frame));
    socket.on("close", () => {
      this.closed = true;
      for (const { reject } of this.pending.values()) reject(new Error("connection lost"));
      this.pending.clear();
    });
  }

  #send(frame) {
    this.socket.write(frameLines(frame));
  }

  #request(call) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.#send({ type: "request", id, call });
    });
  }

  #receive(frame) {
    if (frame.type === "result") {
      const waiting = this.pending.get(frame.id);
      if (waiting === undefined) return;
      this.pending.delete(frame.id);
      if (frame.ok) waiting.resolve(frame.result);
      else waiting.reject(new RemoteServiceError(frame.error.code, frame.error.message));
    } else if (frame.type === "update") {
      const stream = this.streams.get(frame.subscriptionId);
      if (stream === undefined) return;
      // Chord's own parser and decoder: a `reset` or any unknown update throws here.
      const update = stream.decoder.decodeUpdate(parseWireServiceProviderUpdate(frame.update));
      if (stream.active) stream.listener(update, BACKGROUND_CONTEXT);
      else stream.buffer.push(update);
      this.onChange();
    } else if (frame.type === "closed") {
      this.socket.end();
    }
  }

  invoke(call, _context) {
    return this.#request(call);
  }

  async subscribe(serviceId, mode, listener, _context) {
    const subscriptionId = `s${this.nextSubscription++}`;
    const stream = { listener, decoder: createServiceStateDecoder(), active: false, buffer: [] };
    this.streams.set(subscriptionId, stream);
    const raw = await this.#request(createServiceSubscribeCall(subscriptionId, serviceId, mode));
    const snapshot = stream.decoder.decodeSnapshot(parseWireServiceSubscriptionSnapshot(raw));
    return {
      snapshot,
      activate: () => {
        stream.active = true;
        for (const update of stream.buffer.splice(0)) listener(update, BACKGROUND_CONTEXT);
        this.onChange();
      },
      close: async () => {
        this.streams.delete(subscriptionId);
        if (!this.closed) await this.#request(createServiceUnsubscribeCall(subscriptionId)).catch(() => {});
      },
    };
  }
}

function consumer(socketPath, reply) {
  let session = null;
  let waiter = null;

  const view = () => {
    const single = session.single;
    const keyed = {};
    for (const instance of session.live) {
      try {
        const value = instance.state.value;
        if (value !== undefined && value !== null) keyed[value.key] = value;
      } catch {
        // closed a moment ago: its task is finishing
      }
    }
    return { single: single.a.value === undefined ? null : { a: single.a.value, b: single.b.value }, keyed };
  };
  const recheck = () => {
    if (waiter === null) return;
    if (canonical(view()) === canonical(waiter.expect)) {
      const done = waiter;
      waiter = null;
      clearTimeout(done.timer);
      done.resolve({ ok: true, errors: session.errors });
    }
  };

  return {
    async attach() {
      const socket = net.createConnection(socketPath);
      await new Promise((resolve, reject) => {
        socket.once("connect", resolve);
        socket.once("error", reject);
      });
      const errors = [];
      const transport = new WireTransport(socket, () => queueMicrotask(recheck));
      const binding = createRemoteServiceBinding({
        services: [Single, Keyed],
        transport,
        onError: (error) => errors.push(String(error?.message ?? error)),
      });
      const live = new Set();
      session = { socket, binding, errors, live, single: binding.use(Single) };
      binding.observe(Keyed, async (instance, context) => {
        live.add(instance);
        queueMicrotask(recheck);
        await new Promise((resolve) => context.abortSignal?.addEventListener("abort", resolve));
        live.delete(instance);
        queueMicrotask(recheck);
      });
      await binding.ready(BACKGROUND_CONTEXT);
      return { ok: true };
    },
    check(command) {
      return new Promise((resolve) => {
        waiter = {
          expect: command.expect,
          resolve,
          timer: setTimeout(() => {
            waiter = null;
            resolve({ ok: false, view: view(), errors: session.errors });
          }, command.timeout ?? 5000),
        };
        recheck();
      });
    },
    async call(command) {
      const result = await session.single.echo(command.value, BACKGROUND_CONTEXT);
      return { ok: true, result };
    },
    async stale(command) {
      // a call on an address that no longer lives: the provider's code must come through intact
      try {
        await rawCall(socketPath, command.call);
      } catch (error) {
        return { ok: true, code: error.code };
      }
      return { ok: false };
    },
    async detach() {
      await session.binding.dispose(BACKGROUND_CONTEXT);
      session.socket.end();
      const errors = session.errors;
      session = null;
      return { ok: true, errors };
    },
  };
}

async function rawCall(socketPath, call) {
  // One call on its own connection, its error rebuilt as Chord's RemoteServiceError.
  parseServiceCall(call);
  const socket = net.createConnection(socketPath);
  await new Promise((resolve) => socket.once("connect", resolve));
  return await new Promise((resolve, reject) => {
    frameReader(socket, (frame) => {
      if (frame.type !== "result") return;
      socket.end();
      if (frame.ok) resolve(frame.result);
      else reject(new RemoteServiceError(frame.error.code, frame.error.message));
    });
    socket.write(frameLines({ type: "request", id: 1, call }));
  });
}

// -- provider: a Chord provider served over our framing -----------------------------------------

function provider(socketPath, reply, ready) {
  let current = null;

  const fresh = () => {
    const provider = new RemoteServiceProvider([Single, { service: Keyed, mode: "keyed" }]);
    const state = { a: replicatedState(null), b: replicatedState(null) };
    const keyed = new Map();
    const implementation = (a, b) => ({
      a,
      b,
      echo: async (value) => value,
      fail: async (code) => {
        throw new RemoteServiceError(code, `failing with ${code}`);
      },
    });
    provider.provide(Single, implementation(state.a, state.b));
    return { provider, state, keyed, implementation };
  };

  const view = () => {
    const keyed = {};
    for (const [key, entry] of current.keyed) keyed[key] = { generation: entry.generation, value: entry.state.value };
    return { single: { a: current.state.a.value, b: current.state.b.value }, keyed };
  };

  const apply = (op) => {
    const ctx = BACKGROUND_CONTEXT;
    switch (op.op) {
      case "set":
        current.state[op.member].replace(ctx, op.value);
        break;
      case "replace": {
        current.state = { a: replicatedState(op.a), b: replicatedState(op.b) };
        current.provider.replace(Single, current.implementation(current.state.a, current.state.b));
        break;
      }
      case "spawn": {
        if (current.keyed.has(op.key)) break;
        const state = replicatedState(op.value);
        const close = current.provider.spawn(Keyed, op.key, { state, ping: async () => op.key });
        const generation = (current.generations.get(op.key) ?? 0) + 1;
        current.generations.set(op.key, generation);
        current.keyed.set(op.key, { state, close, generation });
        break;
      }
      case "close": {
        const entry = current.keyed.get(op.key);
        if (entry === undefined) break;
        current.keyed.delete(op.key);
        entry.close();
        break;
      }
      case "keyedSet": {
        const entry = current.keyed.get(op.key);
        if (entry !== undefined) entry.state.replace(ctx, op.value);
        break;
      }
      default:
        throw new Error(`unknown op ${op.op}`);
    }
  };

  const server = net.createServer((socket) => {
    const { provider } = current;
    const endpoint = createRemoteServiceEndpoint(provider);
    const encoders = new Map();
    const held = new Map();
    const send = (frame) => socket.write(frameLines(frame));
    const publish = (subscriptionId, update) => {
      const encoder = encoders.get(subscriptionId);
      if (encoder === undefined) return;
      const hold = held.get(subscriptionId);
      if (hold !== undefined) {
        hold.push(update);
        return;
      }
      send({ type: "update", subscriptionId, update: encoder.encodeUpdate(update) });
    };
    frameReader(socket, async (frame) => {
      if (frame.type === "closed") {
        endpoint.dispose();
        socket.end();
        return;
      }
      if (frame.type !== "request") return;
      const control = decodeServiceControlCall(frame.call);
      if (control?.type === "subscribe") {
        encoders.set(control.subscriptionId, createServiceStateEncoder());
        held.set(control.subscriptionId, []);
      }
      try {
        const result = await endpoint.invoke(parseServiceCall(frame.call), publish, BACKGROUND_CONTEXT);
        if (control?.type === "subscribe") {
          const encoder = encoders.get(control.subscriptionId);
          send({ type: "result", id: frame.id, ok: true, result: encoder.encodeSnapshot(result) });
          const waiting = held.get(control.subscriptionId) ?? [];
          held.delete(control.subscriptionId);
          for (const update of waiting) publish(control.subscriptionId, update);
        } else {
          if (control?.type === "unsubscribe") encoders.delete(control.subscriptionId);
          send(result === undefined ? { type: "result", id: frame.id, ok: true } : { type: "result", id: frame.id, ok: true, result });
        }
      } catch (error) {
        if (control?.type === "subscribe") {
          encoders.delete(control.subscriptionId);
          held.delete(control.subscriptionId);
        }
        const code = error instanceof RemoteServiceError ? error.code : "internal_error";
        send({ type: "result", id: frame.id, ok: false, error: { code, message: String(error.message) } });
      }
    });
    socket.on("close", () => endpoint.dispose());
    socket.on("error", () => endpoint.dispose());
  });
  server.listen(socketPath, ready);

  return {
    new() {
      current = { ...fresh(), generations: new Map() };
      return { ok: true, view: view() };
    },
    step(command) {
      for (const op of command.ops) apply(op);
      return { ok: true, view: view() };
    },
  };
}

// -- main ----------------------------------------------------------------------------------------

const [mode, socketPath] = process.argv.slice(2);
const reply = (message) => process.stdout.write(JSON.stringify(message) + "\n");
let handlers;
const start = () => {
  const lines = readline.createInterface({ input: process.stdin });
  let chain = Promise.resolve();
  lines.on("line", (line) => {
    const command = JSON.parse(line);
    chain = chain.then(async () => {
      try {
        reply(await handlers[command.cmd](command));
      } catch (error) {
        reply({ ok: false, error: String(error?.stack ?? error) });
      }
    });
  });
  lines.on("close", () => process.exit(0));
  reply({ ready: true, chord: "0.87.1" });
};
if (mode === "consumer") {
  handlers = consumer(socketPath, reply);
  start();
} else if (mode === "provider") {
  handlers = provider(socketPath, reply, start);
} else {
  process.stderr.write("usage: node chord_peer.mjs consumer|provider SOCKET_PATH\n");
  process.exit(2);
}
