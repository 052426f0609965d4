// Tessera's HTTP front through the official openai SDK: completions and chat,
// streaming and not, n=2, stop sequences, logprobs, usage in streams, a 429
// from a full queue, and a stream aborted mid-way that frees its request.
// Expects TESSERA_HTTP_URL (http://127.0.0.1:PORT) of a server started with
// --max-num-seqs 1 --max-queued-requests 2 and the test ChatML renderer.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const base = process.env.TESSERA_HTTP_URL;
assert.ok(base, 'TESSERA_HTTP_URL must be set');
// TESSERA_API_KEY: the server was started with --api-key-file holding it.
const apiKey = process.env.TESSERA_API_KEY ?? 'unused';
const keyed = { authorization: `Bearer ${apiKey}` };
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0 });
let model;

async function metric(name) {
  const text = await (await fetch(`${base}/metrics`, { headers: keyed })).text();
  let total = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(name + ' ') || line.startsWith(name + '{')) {
      total += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return total;
}

async function waitFor(predicate, ms = 10000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await predicate()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

test('a wrong API key is an AuthenticationError (401, invalid_api_key)', { skip: !process.env.TESSERA_API_KEY }, async () => {
  const wrong = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'not-a-valid-key-0123456789', maxRetries: 0 });
  await assert.rejects(wrong.models.list(), (err) => {
    assert.ok(err instanceof OpenAI.AuthenticationError, String(err));
    assert.equal(err.status, 401);
    assert.equal(err.code, 'invalid_api_key');
    return true;
  });
});

test('models lists the served model', async () => {
  const list = await client.models.list();
  assert.equal(list.data.length, 1);
  model = list.data[0].id;
  assert.equal(list.data[0].object, 'model');
});

test('completion, not streamed', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.model, model);
  assert.ok(r.created > 1.6e9);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.ok(r.choices[0].text.length > 0);
  assert.equal(r.usage.completion_tokens, 12);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 12);
  assert.ok(r.system_fingerprint);
});

test('streamed completion equals the unstreamed one, with logprobs and usage', async () => {
  const params = { model, prompt: 'Once upon a time', max_tokens: 10, temperature: 0 };
  const whole = await client.completions.create(params);
  const stream = await client.completions.create({
    ...params, stream: true, logprobs: 2, stream_options: { include_usage: true },
  });
  let text = '';
  let tokens = [];
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text;
      if (c.logprobs) {
        tokens = tokens.concat(c.logprobs.tokens);
        for (const top of c.logprobs.top_logprobs) assert.equal(Object.keys(top).length, 2);
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, whole.choices[0].text);
  assert.equal(tokens.length, 10);
  assert.equal(tokens.join(''), text);
  assert.equal(finish, 'length');
  assert.deepEqual(usage, whole.usage);
});

test('n=2 gives two choices', async () => {
  const r = await client.completions.create({ model, prompt: 'Once', max_tokens: 8, n: 2, temperature: 1, seed: 7 });
  assert.equal(r.choices.length, 2);
  assert.deepEqual(r.choices.map((c) => c.index).sort(), [0, 1]);
  assert.equal(r.usage.completion_tokens, 16);
});

test('a stop sequence ends the completion before it', async () => {
  const free = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 30, temperature: 0 });
  const text = free.choices[0].text;
  const word = text.trim().split(/\s+/)[2];
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 30, temperature: 0, stop: [word, 'zzzz'] });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.choices[0].text, text.slice(0, text.indexOf(word)));
});

test('chat completion, not streamed and streamed', async () => {
  const messages = [{ role: 'system', content: 'Tell a story.' }, { role: 'user', content: 'Once upon a time' }];
  const r = await client.chat.completions.create({ model, messages, max_completion_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3 });
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.usage.completion_tokens, 8);
  assert.equal(r.choices[0].logprobs.content.length, 8);
  assert.equal(r.choices[0].logprobs.content[0].top_logprobs.length, 3);
  const stream = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let content = '';
  let role = null;
  let usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) content += c.delta.content;
    }
  }
  assert.equal(role, 'assistant');
  assert.equal(content, r.choices[0].message.content);
  assert.equal(usage.completion_tokens, 8);
});

test('apply-template returns the rendered prompt', async () => {
  const res = await fetch(`${base}/apply-template`, {
    method: 'POST', headers: { 'content-type': 'application/json', ...keyed },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }),
  });
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { prompt: '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n' });
});

test('priority (vLLM\'s extension) is accepted, and refused out of range with its param', async () => {
  const r = await client.completions.create({ model, prompt: 'Once', max_tokens: 4, temperature: 0, priority: -5 });
  assert.equal(r.usage.completion_tokens, 4);
  await assert.rejects(
    client.completions.create({ model, prompt: 'Once', max_tokens: 4, priority: 2 ** 31 }),
    (e) => e.status === 400 && e.param === 'priority');
});

test('usage reports the prompt tokens the prefix cache supplied', async () => {
  const prompt = 'The little dog ran to the park and played with a red ball until the sun went down and the stars came out. ' + Date.now();
  const params = { model, prompt, max_tokens: 2, temperature: 0 };
  const first = await client.completions.create(params);
  assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
  const second = await client.completions.create(params);
  const cached = second.usage.prompt_tokens_details.cached_tokens;
  assert.equal(second.usage.prompt_tokens, first.usage.prompt_tokens);
  // Whole 16-token blocks are cached, and the last prompt token is always computed.
  assert.ok(cached >= 16 && cached < second.usage.prompt_tokens, `cached ${cached}`);
  assert.equal(cached % 16, 0);
});

test('a full queue answers 429', async () => {
  // One sequence runs and one waits (--max-num-seqs 1 --max-queued-requests 2).
  const long = { model, prompt: 'Once', max_tokens: 600, temperature: 0, ignore_eos: true };
  const results = await Promise.allSettled(Array.from({ length: 6 }, () => client.completions.create(long)));
  const refused = results.filter((r) => r.status === 'rejected');
  assert.ok(refused.length >= 1, 'no request was refused');
  for (const r of refused) {
    assert.equal(r.reason.status, 429);
    assert.equal(r.reason.error?.type ?? r.reason.type, 'rate_limit_error');
  }
  assert.ok(results.some((r) => r.status === 'fulfilled'));
});

test('aborting a stream cancels its request', async () => {
  const cancelledBefore = await metric('tessera_request_failure_total{code="CANCELLED"}');
  const tokensBefore = await metric('tessera_generation_tokens_total');
  const controller = new AbortController();
  const stream = await client.completions.create(
    { model, prompt: 'Once', max_tokens: 1900, temperature: 0, ignore_eos: true, stream: true },
    { signal: controller.signal });
  let chunks = 0;
  try {
    for await (const _ of stream) {
      // Chunks already buffered may still arrive after the abort: stop reading.
      if (++chunks === 3) { controller.abort(); break; }
    }
  } catch (e) {
    // The SDK ends an aborted stream with an abort error or quietly.
    assert.match(String(e?.name), /Abort/);
  }
  assert.equal(chunks, 3);
  assert.ok(await waitFor(async () => (await metric('tessera_request_failure_total{code="CANCELLED"}')) > cancelledBefore),
    'the request was not cancelled');
  assert.ok(await waitFor(async () => (await metric('tessera_requests_running')) === 0), 'the request still runs');
  const generated = (await metric('tessera_generation_tokens_total')) - tokensBefore;
  assert.ok(generated < 1900, `generated ${generated} tokens after the abort`);
  const health = await fetch(`${base}/health`);
  assert.equal(health.status, 200);
});
