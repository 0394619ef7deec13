// The session in a browser: one WebSocket to the server (coding_agent/server/web.py), which
// attaches to the session's worker like the TUI does and sends the followed conversation's view
// (a baseline, then "the first N entries are unchanged, here is the rest"), the open dialogs and
// replies to our requests (coding_agent/server/web_bridge.py documents the messages).
//
// The token comes from the URL's fragment (#token=…, never sent to any server) or the form; it
// is kept in this tab's sessionStorage and taken out of the address bar, and never logged.

import { el, forgetEntry, renderDialog, renderEntry, renderLive, renderTasks } from "./render.js";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "coding-agent-token";

const state = {
  token: null,
  session: null,
  ws: null,
  nextId: 1,
  pending: new Map(), // request id -> {resolve, reject}
  nodes: [], // one DOM node per entry of the view, in order
  cards: new Map(), // tool call id -> its card
  busy: false,
  retry: 0,
};

// -- credentials ------------------------------------------------------------------------------
function readFragment() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const token = fragment.get("token");
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  state.session = fragment.get("session") || state.session;
  // The token leaves the address bar (and the history); the session id stays, for a reload.
  history.replaceState(null, "", location.pathname + (state.session ? `#session=${state.session}` : ""));
  state.token = sessionStorage.getItem(TOKEN_KEY);
}

function showLogin(message) {
  $("app").hidden = true;
  $("login").hidden = false;
  $("login-session").value = state.session ?? "";
  $("login-error").textContent = message ?? "";
}

$("login").addEventListener("submit", (event) => {
  event.preventDefault();
  state.token = $("login-token").value.trim();
  state.session = $("login-session").value.trim() || null;
  sessionStorage.setItem(TOKEN_KEY, state.token);
  $("login-token").value = "";
  $("login").hidden = true;
  connect();
});

// -- the connection ---------------------------------------------------------------------------
function setStatus(name, text) {
  $("status").dataset.state = name;
  $("status").textContent = text ?? name;
  document.body.classList.toggle("stale", name !== "live");
}

function connect() {
  $("app").hidden = false;
  setStatus("connecting", "connecting…");
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const ws = new WebSocket(`${scheme}://${location.host}/ws`);
  state.ws = ws;
  ws.onopen = () => {
    const hello = state.session ? { token: state.token, session: state.session } : { token: state.token, new: {} };
    ws.send(JSON.stringify(hello));
  };
  ws.onmessage = (event) => {
    const arrived = performance.now();
    const message = JSON.parse(event.data);
    if (message.type === "view" && message.reset) document.body.dataset.viewAt = String(arrived);
    receive(message);
  };
  ws.onclose = (event) => {
    if (state.ws !== ws) return;
    state.ws = null;
    for (const { reject } of state.pending.values()) reject(new Error("the connection was lost"));
    state.pending.clear();
    if (event.code === 4401) {
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin("The server refused the token.");
      return;
    }
    if (event.code === 4404) {
      showLogin(`The server has no such session (${event.reason}).`);
      return;
    }
    const delay = Math.min(2000, 250 * 2 ** state.retry++);
    setStatus("reconnecting", "reconnecting…");
    setTimeout(connect, delay);
  };
}

function request(message) {
  const ws = state.ws;
  if (!ws || ws.readyState !== WebSocket.OPEN) return Promise.reject(new Error("not connected"));
  const id = state.nextId++;
  return new Promise((resolve, reject) => {
    state.pending.set(id, { resolve, reject });
    ws.send(JSON.stringify({ ...message, id }));
  });
}

function toast(text) {
  $("toast").textContent = text;
}

function receive(message) {
  switch (message.type) {
    case "welcome":
      document.body.dataset.welcomeAt = String(performance.now());
      state.session = message.session;
      state.retry = 0;
      history.replaceState(null, "", `${location.pathname}#session=${message.session}`);
      $("session").textContent = `${message.session} · ${message.cwd}`;
      setStatus("attaching", "attaching…"); // live once the view arrives
      loadBranches();
      break;
    case "error":
      toast(`${message.code}: ${message.message}`);
      break;
    case "view":
      if (message.view === null) setStatus("unavailable", "worker restarting…");
      else {
        if (state.ws) setStatus("live", "live");
        showView(message);
      }
      break;
    case "dialogs":
      showDialogs(message.dialogs);
      break;
    case "reply": {
      const waiting = state.pending.get(message.id);
      state.pending.delete(message.id);
      if (!waiting) break;
      if (message.ok) waiting.resolve(message.result);
      else waiting.reject(new Error(`${message.error.code}: ${message.error.message}`));
      break;
    }
  }
}

// -- the view ---------------------------------------------------------------------------------
function showView({ reset, keep, entries, rest }) {
  const transcript = $("transcript");
  const atBottom = transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 40;
  const from = reset ? 0 : keep;
  for (const node of state.nodes.splice(from)) {
    forgetEntry(node);
    node.remove();
  }
  if (reset) state.cards.clear();
  const fragment = document.createDocumentFragment();
  for (const entry of entries) {
    const node = renderEntry(entry, state.cards);
    state.nodes.push(node);
    fragment.append(node);
  }
  transcript.append(fragment);
  for (const live of document.querySelectorAll("#transcript .tool-card > .live")) live.remove();
  $("live").replaceChildren(...renderLive(rest, state.cards));
  $("tasks").replaceChildren(...renderTasks(rest));
  setBusy(Boolean(rest?.turn));
  if (reset || atBottom) transcript.scrollTop = transcript.scrollHeight;
  document.body.dataset.entries = String(state.nodes.length);
  document.body.dataset.conversation = String(rest?.conversation?.id ?? "");
  if (reset) document.body.dataset.renderedAt = String(performance.now());
}

function setBusy(busy) {
  state.busy = busy;
  document.body.classList.toggle("busy", busy);
  $("abort").disabled = !busy;
  $("follow-up").hidden = !busy;
  $("send").textContent = busy ? "Steer" : "Send";
}

function showDialogs(dialogs) {
  $("dialogs").replaceChildren(...dialogs.map((dialog) => renderDialog(dialog, answer)));
}

async function answer(kind, key, value) {
  const message = kind === "approval" ? { type: "decide", key, decision: value } : { type: "submit", key, response: value };
  try {
    await request(message);
  } catch (error) {
    toast(error.message);
  }
}

// -- actions ----------------------------------------------------------------------------------
async function send(mode) {
  const text = $("prompt").value;
  if (!text.trim()) return;
  try {
    await request({ type: "send", text, mode });
    $("prompt").value = "";
    toast("");
  } catch (error) {
    toast(error.message);
  }
}

$("send").addEventListener("click", () => send(state.busy ? "steer" : "prompt"));
$("follow-up").addEventListener("click", () => send("followUp"));
$("prompt").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    send(state.busy ? "steer" : "prompt");
  }
});
$("abort").addEventListener("click", () => request({ type: "abort" }).catch((error) => toast(error.message)));

async function loadBranches() {
  try {
    const { current, branches } = await request({ type: "branches" });
    const select = $("branches");
    select.replaceChildren(
      ...branches.map((branch) => {
        const option = el("option", null, `${branch.number}: ${branch.summary ?? "(no prompt yet)"}`);
        option.value = String(branch.id);
        option.selected = branch.id === current;
        return option;
      }),
    );
  } catch (error) {
    toast(error.message);
  }
}

$("branches").addEventListener("focus", loadBranches);
$("branches").addEventListener("change", async (event) => {
  try {
    await request({ type: "follow", conversation: Number(event.target.value) });
  } catch (error) {
    toast(error.message);
  }
});

readFragment();
if (state.token) connect();
else showLogin();
