// Measures Hugging Face tokenizers' encode throughput per CPU-second (its Node binding, the
// Rust library underneath) on the prompts of a JSON-lines file, for the side-by-side ratio
// smgbench's tokenizer suite reports. CPU time is the whole process's (every thread the
// binding uses), so a parallel batch is not counted as free.
//
//   node hack/tokenizer/hfbench.js <tokenizer.json> <prompts.jsonl> <seconds>
//
// Prints one JSON object: {"bytes", "cpu_seconds", "mb_per_cpu_second", "mode"}, the better of
// one encode per call and encodeBatch over all prompts, so the reference is never understated.
'use strict';
const fs = require('fs');
const path = require('path');
const os = require('os');

const data = process.env.SMG_TOKENIZER_DATA || path.join(os.homedir(), '.cache/smg-tokenizers/v1');
const { Tokenizer } = require(path.join(data, 'npm/node_modules/@anush008/tokenizers'));
const [tokFile, promptsFile, secondsArg] = process.argv.slice(2);
const tok = Tokenizer.fromFile(tokFile);
const prompts = fs.readFileSync(promptsFile, 'utf8').split('\n').filter((l) => l).map((l) => JSON.parse(l));
const promptBytes = prompts.reduce((n, p) => n + Buffer.byteLength(p), 0);
const seconds = Number(secondsArg || 3);

function cpu() { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; }

async function measure(mode, once) {
  await once(); // warm: the first pass fills the binding's caches, as steady state would
  const start = cpu();
  let bytes = 0;
  while (cpu() - start < seconds) { await once(); bytes += promptBytes; }
  const used = cpu() - start;
  return { mode, bytes, cpu_seconds: used, mb_per_cpu_second: bytes / 1e6 / used };
}

(async () => {
  const single = await measure('encode', async () => {
    for (const p of prompts) await tok.encode(p, null, { addSpecialTokens: false });
  });
  const batch = await measure('encodeBatch', () => tok.encodeBatch(prompts, { addSpecialTokens: false }));
  console.log(JSON.stringify(single.mb_per_cpu_second >= batch.mb_per_cpu_second ? single : batch));
})();
