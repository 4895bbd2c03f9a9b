// Drives an NPU Chat server with the official openai npm package. Run by
// node_test.go with NPUCHAT_URL set to a test server; exits non-zero on
// the first failed check.
import assert from "node:assert/strict";
import { test } from "node:test";
import OpenAI from "openai";

const base = process.env.NPUCHAT_URL;
assert.ok(base, "NPUCHAT_URL must point at a running NPU Chat server");
const client = new OpenAI({ baseURL: base + "/v1", apiKey: "none", maxRetries: 0 });

test("chat completion, as in the model card's Python example", async () => {
  const r = await client.chat.completions.create({
    model: "minicpm5:2b",
    messages: [
      { role: "system", content: "You are a helpful and concise assistant." },
      { role: "user", content: "What are the three laws of robotics?" },
    ],
    max_tokens: 200,
    temperature: 0.3,
  });
  assert.equal(r.choices[0].message.content, "echo: What are the three laws of robotics?");
  assert.equal(r.choices[0].finish_reason, "stop");
  assert.equal(r.usage.completion_tokens, 8);
});

test("streamed chat completion", async () => {
  const stream = await client.chat.completions.create({
    model: "minicpm5:2b",
    messages: [{ role: "user", content: "count the chunks" }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = "", finish = null, usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content ?? "";
      finish = c.finish_reason ?? finish;
    }
  }
  assert.equal(text, "echo: count the chunks");
  assert.equal(finish, "stop");
  assert.equal(usage.completion_tokens, 4);
});

test("models and errors", async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), ["minicpm5:2b"]);
  await assert.rejects(
    client.chat.completions.create({ model: "minicpm5:2b", messages: [{ role: "user", content: "x" }], temperature: 9 }),
    (err) => err.status === 400 && /temperature/.test(err.message),
  );
  await assert.rejects(
    client.chat.completions.create({ model: "nope", messages: [{ role: "user", content: "x" }] }),
    (err) => err.status === 404,
  );
});

test("aborting a stream", async () => {
  const ac = new AbortController();
  const stream = await client.chat.completions.create(
    { model: "minicpm5:2b", messages: [{ role: "user", content: "w ".repeat(500) }], stream: true },
    { signal: ac.signal },
  );
  let n = 0;
  try {
    for await (const _ of stream) {
      if (++n === 3) ac.abort();
    }
  } catch (err) {
    assert.equal(err.name, "APIUserAbortError");
  }
  assert.equal(n, 3); // no chunk after the abort
});
