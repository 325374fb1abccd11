// A small OpenAI-compatible /v1/chat/completions server over node-llama-cpp, for the
// real-model test: `node server.mjs MODEL.gguf PORT_FILE`. It listens on an ephemeral
// port of 127.0.0.1 and writes the port to PORT_FILE once the model is loaded.
// One thread, greedy decoding (temperature 0), so the same request gives the same text.
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import { getLlama, LlamaChatSession } from "node-llama-cpp";

const [modelPath, portFile] = process.argv.slice(2);
if (!modelPath || !portFile) {
  console.error("usage: node server.mjs MODEL.gguf PORT_FILE");
  process.exit(2);
}
const modelId = path.basename(modelPath, ".gguf");
const llama = await getLlama({ gpu: false, build: "never" });
const model = await llama.loadModel({ modelPath });
const context = await model.createContext({ contextSize: 2048, threads: 1, sequences: 1 });

function text(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => p.text ?? "").join("\n\n");
  return "";
}

// Requests run one at a time: the context has one sequence.
let queue = Promise.resolve();

async function complete(body) {
  const messages = body.messages ?? [];
  const system = messages.filter((m) => m.role === "system").map((m) => text(m.content)).join("\n");
  const turns = messages.filter((m) => m.role !== "system");
  const last = turns.pop();
  if (!last || last.role !== "user") throw new Error("the last message must be a user message");
  const history = [];
  if (system) history.push({ type: "system", text: system });
  for (const m of turns) {
    if (m.role === "user") history.push({ type: "user", text: text(m.content) });
    else history.push({ type: "model", response: [text(m.content)] });
  }
  const sequence = context.getSequence();
  try {
    const session = new LlamaChatSession({ contextSequence: sequence });
    session.setChatHistory(history);
    const started = Date.now();
    const answer = await session.prompt(text(last.content), {
      temperature: 0,
      maxTokens: body.max_tokens ?? 32,
    });
    const prompt = messages.map((m) => text(m.content)).join("\n");
    return {
      id: `chatcmpl-${started}`,
      object: "chat.completion",
      created: Math.floor(started / 1000),
      model: modelId,
      choices: [{ index: 0, message: { role: "assistant", content: answer }, finish_reason: "stop" }],
      usage: {
        prompt_tokens: model.tokenize(prompt).length,
        completion_tokens: model.tokenize(answer).length,
        total_tokens: model.tokenize(prompt).length + model.tokenize(answer).length,
      },
    };
  } finally {
    sequence.dispose();
  }
}

const server = http.createServer((req, res) => {
  let raw = "";
  req.on("data", (chunk) => (raw += chunk));
  req.on("end", () => {
    const reply = (status, value) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(value));
    };
    if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
      return reply(404, { error: { message: "not found" } });
    }
    queue = queue.then(async () => {
      try {
        reply(200, await complete(JSON.parse(raw)));
      } catch (e) {
        reply(400, { error: { message: String(e?.message ?? e) } });
      }
    });
  });
});
server.listen(0, "127.0.0.1", () => {
  fs.writeFileSync(portFile, String(server.address().port));
});
