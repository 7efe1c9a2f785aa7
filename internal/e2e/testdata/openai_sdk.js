// Sends chat completions through the OpenAI Node SDK and prints one JSON line per request:
// {"i", "stream", "text", "finish"}. Arguments: base URL, model, request count, concurrency,
// and a JSON array of stop lists (request i uses list i % length; half the requests stream).
// NODE_PATH names the directory holding node_modules/openai.
const { OpenAI } = require("openai");

async function main() {
  const [baseURL, model, count, concurrency, stopsJSON] = process.argv.slice(2);
  const stops = JSON.parse(stopsJSON);
  const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 60000 });
  let next = 0;
  async function one(i) {
    const stop = stops[i % stops.length];
    const stream = i % 2 === 1;
    const params = { model, messages: [{ role: "user", content: `Say something, ${i}.` }] };
    if (stop.length > 0) params.stop = stop;
    let text = "";
    let finish = null;
    if (stream) {
      const s = await client.chat.completions.create({ ...params, stream: true });
      for await (const chunk of s) {
        for (const c of chunk.choices) {
          text += c.delta?.content ?? "";
          if (c.finish_reason) finish = c.finish_reason;
        }
      }
    } else {
      const r = await client.chat.completions.create(params);
      text = r.choices[0].message.content ?? "";
      finish = r.choices[0].finish_reason;
    }
    process.stdout.write(JSON.stringify({ i, stream, text, finish }) + "\n");
  }
  async function worker() {
    while (next < Number(count)) {
      await one(next++);
    }
  }
  await Promise.all(Array.from({ length: Number(concurrency) }, worker));
}

main().catch((err) => {
  console.error(String(err && err.stack ? err.stack : err));
  process.exit(1);
});
