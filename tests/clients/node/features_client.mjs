// Tool calls, structured output and log-probabilities through the
// official openai npm package. Run by node_test.go against a scripted
// backend that answers "Checking." and then calls get_weather for Paris.
import assert from "node:assert/strict";
import { test } from "node:test";
import OpenAI from "openai";

const base = process.env.NPUCHAT_URL;
assert.ok(base, "NPUCHAT_URL must point at a running NPU Chat server");
const client = new OpenAI({ baseURL: base + "/v1", apiKey: "none", maxRetries: 0 });

const tools = [{
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
}];

test("tool call, whole", async () => {
  const r = await client.chat.completions.create({
    model: "minicpm5:2b", messages: [{ role: "user", content: "weather?" }], tools, tool_choice: "auto",
  });
  const c = r.choices[0];
  assert.equal(c.finish_reason, "tool_calls");
  assert.equal(c.message.tool_calls.length, 1);
  assert.equal(c.message.tool_calls[0].function.name, "get_weather");
  assert.deepEqual(JSON.parse(c.message.tool_calls[0].function.arguments), { city: "Paris" });
});

test("tool call, streamed, through the SDK's stream helper", async () => {
  const runner = client.chat.completions.stream({
    model: "minicpm5:2b", messages: [{ role: "user", content: "weather?" }], tools,
  });
  const done = await runner.finalChatCompletion();
  const m = done.choices[0].message;
  assert.equal(done.choices[0].finish_reason, "tool_calls");
  assert.equal(m.content, "Checking.");
  assert.equal(m.tool_calls[0].id, "call_1");
  assert.equal(m.tool_calls[0].function.name, "get_weather");
  assert.equal(m.tool_calls[0].function.arguments, '{"city":"Paris"}');
});

test("response_format json_schema and logprobs reach the server", async () => {
  const r = await client.chat.completions.create({
    model: "minicpm5:2b", messages: [{ role: "user", content: "json" }],
    response_format: { type: "json_schema", json_schema: { name: "w", schema: { type: "object" } } },
    logprobs: true, top_logprobs: 2,
  });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, 1);
  assert.equal(lp[0].token, "Checking.");
  assert.equal(lp[0].top_logprobs.length, 2);
});

test("a bad schema is a 400 naming the keyword", async () => {
  await assert.rejects(
    client.chat.completions.create({
      model: "minicpm5:2b", messages: [{ role: "user", content: "x" }],
      tools, tool_choice: { type: "function", function: { name: "nope" } },
    }),
    (err) => err.status === 400 && /nope/.test(err.message),
  );
});

test("Responses stream through the SDK's stream helper (finalResponse)", async () => {
  // output_item.added carried the message without "content": [] and
  // finalResponse() threw "output.content is not iterable".
  const stream = client.responses.stream({
    model: "minicpm5:2b", input: "weather?",
    tools: [{ type: "function", name: "get_weather", parameters: tools[0].function.parameters }],
  });
  const deltas = [];
  stream.on("response.output_text.delta", (e) => deltas.push(e.delta));
  const r = await stream.finalResponse();
  assert.equal(r.status, "completed");
  assert.equal(r.output_text, "Checking.");
  assert.deepEqual(deltas, ["Checking."]);
  const call = r.output.find((o) => o.type === "function_call");
  assert.equal(call.name, "get_weather");
  assert.deepEqual(JSON.parse(call.arguments), { city: "Paris" });
});

test("embeddings on a backend without them: a 400 the SDK reports", async () => {
  await assert.rejects(
    client.embeddings.create({ model: "minicpm5:2b", input: "hello" }),
    (err) => err.status === 400 && /no embeddings/.test(err.message),
  );
});
