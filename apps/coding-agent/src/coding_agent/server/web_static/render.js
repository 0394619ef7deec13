// Drawing the ConversationView (docs/design/view.md#shape) as DOM: entries, tool cards, the
// running turn, the tasks panel and the dialogs. Text is always set with textContent, never
// parsed as HTML: whatever a model or a tool wrote stays text.

/** A new element with a class and, optionally, text. */
export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((block) => (block?.type === "text" ? block.text : block?.type === "image" ? "[image]" : ""))
    .join("");
}

function firstMessage(entry, role) {
  return (entry.model ?? []).find((message) => message?.role === role);
}

const SUMMARY_KEYS = ["command", "path", "pattern", "query", "url", "question"];

/** A tool call's one-line summary: its name and its most telling argument. */
export function toolTitle(name, args) {
  const key = SUMMARY_KEYS.find((k) => typeof args?.[k] === "string");
  return key ? `${name} ${args[key]}` : name;
}

/** A unified diff, its lines coloured by class (+ added, - removed, @@ hunk). */
export function diffBlock(diff) {
  const pre = el("pre", "diff");
  for (const line of diff.split("\n")) {
    let kind = "ctx";
    if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("@@")) kind = "hunk";
    else if (line.startsWith("+")) kind = "add";
    else if (line.startsWith("-")) kind = "del";
    pre.append(el("span", kind, line + "\n"));
  }
  return pre;
}

function toolCard(call) {
  const card = el("details", "tool-card pending");
  card.dataset.callId = call.id;
  const summary = el("summary", "tool-title");
  summary.append(el("span", "tool-status"), el("span", "tool-name", toolTitle(call.name, call.arguments)));
  card.append(summary);
  const args = { ...(call.arguments ?? {}) };
  if (Object.keys(args).length) card.append(el("pre", "tool-args", JSON.stringify(args, null, 2)));
  return card;
}

/** The body of a tool result (its diff when it has one, else its text) put into `card`. */
function fillCard(card, entry, message) {
  const diff = entry.data?.details?.diff;
  const error = Boolean(message?.isError);
  card.classList.remove("pending", "running");
  card.classList.add(error ? "error" : "done");
  let body;
  if (typeof diff === "string" && diff && !error) {
    body = diffBlock(diff);
    card.open = true;
  } else {
    body = el("pre", "tool-output", textOf(message?.content));
    if (error) card.open = true;
  }
  body.classList.add("tool-result");
  card.append(body);
  return body;
}

/**
 * One entry as a DOM node. `cards` maps a tool call's id to its card (filled by the result
 * entry that comes later); a result whose card is shown goes into the card, and its own node is
 * an empty marker that takes the result out again when the entry leaves the transcript.
 */
export function renderEntry(entry, cards) {
  const kind = typeof entry.kind === "string" ? entry.kind : "";
  const node = el("div", `entry kind-${kind.replace(/[^a-z0-9_-]/gi, "-")}`);
  node.dataset.id = entry.id;
  if (kind === "pi.user" && typeof entry.data?.meta === "string") {
    // the model read it, the user did not type it (an imported slash command's prompt, a
    // compaction summary): one dim, collapsed line naming it
    node.classList.add("meta");
    const details = el("details", "meta-message");
    details.append(el("summary", "notice", `(${entry.data.meta})`));
    details.append(el("div", "text", textOf(firstMessage(entry, "user")?.content)));
    node.append(details);
  } else if (kind === "pi.user") {
    // data.typed: an imported command as the user typed it (not the tags another agent wrote)
    const typed = typeof entry.data?.typed === "string" ? entry.data.typed : null;
    node.append(el("div", "who", "you"), el("div", "text", typed ?? textOf(firstMessage(entry, "user")?.content)));
  } else if (kind === "pi.assistant") {
    const message = firstMessage(entry, "assistant") ?? entry.data?.display;
    for (const block of message?.content ?? []) {
      if (block?.type === "text" && block.text) node.append(el("div", "text", block.text));
      else if (block?.type === "thinking" && block.thinking) node.append(el("div", "thinking", block.thinking));
      else if (block?.type === "toolCall") {
        const card = toolCard(block);
        cards.set(block.id, card);
        node.append(card);
      }
    }
    if (entry.data?.reason) node.append(el("div", "notice", `(${entry.data.reason})`));
    if (message?.errorMessage) node.append(el("div", "error", message.errorMessage));
  } else if (kind === "pi.tool_result") {
    const message = firstMessage(entry, "toolResult");
    const card = cards.get(message?.toolCallId);
    if (card) {
      node.className = "entry marker";
      node.injected = fillCard(card, entry, message);
    } else {
      const orphan = toolCard({ id: message?.toolCallId, name: message?.toolName ?? "tool", arguments: {} });
      fillCard(orphan, entry, message);
      node.append(orphan);
    }
  } else if (kind === "pi.usage" || kind === "pi.system") {
    node.hidden = true;
  } else {
    const text = textOf(firstMessage(entry, "user")?.content) || entry.data?.summary || entry.data?.text || kind;
    node.append(el("div", "notice", String(text)));
  }
  return node;
}

/** Undo what a removed entry node did elsewhere (a result put into an earlier card). */
export function forgetEntry(node) {
  node.injected?.remove();
}

/** A tool slot's live state (status, what it waits on, the tail of its output) on `card`. */
export function showSlot(card, slot) {
  card.querySelector(".live")?.remove();
  card.classList.remove("pending", "running");
  card.classList.add(slot.status === "running" ? "running" : "pending");
  const live = el("div", "live");
  if (slot.waitingOn) live.append(el("div", "waiting", `waiting on ${slot.waitingOn}`));
  if (slot.output) live.append(el("pre", "tool-output", slot.output.split("\n").slice(-20).join("\n")));
  card.append(live);
  if (slot.output || slot.waitingOn) card.open = true;
}

/** The running turn: the streaming message, the tool slots whose call has no card in the
 * transcript (`cards`: the shown ones get their live state there) and the queued inputs. */
export function renderLive(rest, cards) {
  const turn = rest?.turn;
  const out = [];
  if (!turn) return out;
  const stage = turn.generation?.stage ?? "running";
  out.push(el("div", "turn-stage", `● ${stage}`));
  const text = (turn.message?.content ?? []).filter((b) => b?.type === "text").map((b) => b.text).join("");
  if (text) out.push(el("div", "entry kind-pi-assistant streaming", text));
  for (const slot of turn.tools ?? []) {
    const shown = cards.get(slot.callId);
    if (shown) {
      if (!shown.classList.contains("done") && !shown.classList.contains("error")) showSlot(shown, slot);
      continue;
    }
    const card = toolCard({ id: slot.callId, name: slot.name, arguments: slot.args });
    showSlot(card, slot);
    out.push(card);
  }
  for (const input of rest.inbox ?? []) {
    const text = textOf(input.content ?? input.input?.content);
    out.push(el("div", "queued", `queued (${input.mode}): ${text}`));
  }
  return out;
}

/** The tasks panel: live tasks (jobs, subagents…), the todo list, a running compaction. */
export function renderTasks(rest) {
  const out = [el("h2", null, "Tasks")];
  const list = el("ul", "task-list");
  for (const [id, task] of Object.entries(rest?.tasks ?? {})) {
    const status = task.status ?? {};
    const what = typeof status === "object" ? status.title ?? status.command ?? status.phase ?? "" : String(status);
    const item = el("li", `task${task.marked ? " stopping" : ""}`, `#${id} ${task.kind}${what ? ": " + what : ""}`);
    list.append(item);
  }
  if (rest?.compaction) list.append(el("li", "task", `compacting (${rest.compaction.stage ?? "…"})`));
  if (!list.childElementCount) list.append(el("li", "none", "no tasks running"));
  out.push(list);
  const todos = rest?.plugins?.["coding-agent.todo"]?.todos ?? [];
  if (todos.length) {
    out.push(el("h2", null, "Todo"));
    const items = el("ul", "todo-list");
    for (const todo of todos) items.append(el("li", `todo ${todo.status}`, todo.content));
    out.push(items);
  }
  return out;
}

/** One open dialog, its buttons calling `answer(kind, key, value)`. */
export function renderDialog(dialog, answer) {
  const { key, kind, request } = dialog;
  const box = el("div", `dialog ${kind}`);
  box.dataset.key = key;
  const buttons = el("div", "buttons");
  const button = (label, className, value) => {
    const b = el("button", className, label);
    b.type = "button";
    b.addEventListener("click", () => answer(kind, key, value));
    buttons.append(b);
  };
  if (kind === "approval") {
    box.append(el("div", "dialog-title", `Allow ${toolTitle(request?.name, request?.args)}?`));
    if (request?.reason) box.append(el("div", "reason", request.reason));
    box.append(el("pre", "tool-args", JSON.stringify(request?.args ?? {}, null, 2)));
    button("Allow", "allow", { decision: "allow" });
    if (request?.sandbox) button("Allow inside the sandbox", "sandboxed", { decision: "allow", sandboxed: true });
    if (request?.rule && (request.scopes ?? []).includes("session")) {
      button(`Always allow ${request.rule} in this session`, "always", { decision: "allow", rule: request.rule, scope: "session" });
    }
    button("Deny", "deny", { decision: "deny" });
  } else {
    box.append(el("div", "dialog-title", request?.question ?? "A question"));
    for (const option of request?.options ?? []) button(option, "option", { outcome: "answered", answer: option });
    if (request?.allowText) {
      const input = el("input", "answer-text");
      input.placeholder = "your answer";
      const b = el("button", "submit-text", "Answer");
      b.type = "button";
      b.addEventListener("click", () => answer(kind, key, { outcome: "answered", answer: input.value }));
      buttons.append(input, b);
    }
    button("Skip", "skip", { outcome: "cancelled" });
  }
  box.append(buttons);
  return box;
}
