// An editor written with the Agent Client Protocol's TypeScript SDK (@agentclientprotocol/sdk):
// it starts `coding-agent acp` (argv: the binary, then its arguments), initializes, opens a
// session in the current folder, sends one prompt, answers every permission request with the
// option whose kind is "allow_once", and prints one JSON line per thing seen, then "done".
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, methods, ndJsonStream, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";

const [binary, ...args] = process.argv.slice(2);
const agent = spawn(binary, args, { stdio: ["pipe", "pipe", "inherit"] });
const stream = ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
const say = (kind, value) => console.log(JSON.stringify({ kind, value }));

const app = client({ name: "ts-editor" })
  .onRequest(methods.client.session.requestPermission, ({ params }) => {
    say("permission", { title: params.toolCall.title, options: params.options.map((o) => o.kind) });
    const allow = params.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  })
  .onNotification(methods.client.session.update, ({ params }) => {
    say("update", params.update);
  });

try {
  await app.connectWith(stream, async (ctx) => {
    const init = await ctx.request(methods.agent.initialize, {
      protocolVersion: PROTOCOL_VERSION,
      clientCapabilities: {},
    });
    say("initialize", init);
    const session = await ctx.request(methods.agent.session.new, {
      cwd: process.cwd(),
      mcpServers: [],
    });
    say("session", session);
    const done = await ctx.request(methods.agent.session.prompt, {
      sessionId: session.sessionId,
      prompt: [{ type: "text", text: "write the list" }],
    });
    say("stop", done);
  });
  console.log("done");
} finally {
  agent.kill();
}
