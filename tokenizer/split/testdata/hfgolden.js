// Regenerates hf_golden.json: how Hugging Face tokenizers (its Node binding,
// the Rust library with fancy-regex underneath) cuts generated texts with each
// Split pattern (behavior Isolated). TestHFGolden checks the Go scanners
// against it.
//
//   node tokenizer/split/testdata/hfgolden.js > tokenizer/split/testdata/hf_golden.json
'use strict';
const path = require('path');
const os = require('os');
const data = process.env.SMG_TOKENIZER_DATA || path.join(os.homedir(), '.cache/smg-tokenizers/v1');
const { Tokenizer } = require(path.join(data, 'npm/node_modules/@anush008/tokenizers'));

const patterns = {
  qwen2: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  llama3: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  gpt2: "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
  deepseek_digits: '\\p{N}{1,3}',
  deepseek_cjk: '[一-龥぀-ゟ゠-ヿ]+',
  deepseek_words: "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
};

function preTokenizer(p) {
  return Tokenizer.fromString(JSON.stringify({
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
    pre_tokenizer: { type: 'Split', pattern: { Regex: p }, behavior: 'Isolated', invert: false },
    post_processor: null, decoder: null,
    model: { type: 'WordLevel', vocab: { '[UNK]': 0 }, unk_token: '[UNK]' },
  })).getPreTokenizer();
}

const fragments = [
  'Hello', 'world', 'the', 'The', "don't", "I'm", "we'll", "it's", "THEY'RE", "You'VE", "I'D", "'S", "'s", "'ſ", "'t",
  "'re", "'ll", "'lL", "'Ll", "'ve", "'d", "'m", "'", "''", '’s', '’', 'ſ', 's', 'e', 'l', 'r', 'v',
  '你好世界', '中文分词', '一', '龥', '龦', '𠀀', 'こんにちは', 'カタカナ', '日本語', 'ー', '々', '〆', '゙', 'ㄅ',
  'مرحبا', 'بالعالم', '٣٤٥', '٠١٢', '안녕하세요', 'नमस्ते', 'สวัสดี', 'Привет', 'Ελλάδα', 'İ', 'ß', 'ǅ', 'ʰ', 'µ',
  '😀', '👨\u200d👩\u200d👧', '👍🏽', '🇺🇸', 'e\u0301', '\u0301', '\u20dd', '\u{1d400}', '\u{10400}', '𝟘', '\u{E0001}', '\ue000', '\u0378',
  'func main() {', 'x := a+b*3;', 'if (x != 0) {\n\treturn -1;\n}', '<|im_start|>', '#include <stdio.h>', '1,234.56',
  '3.14159', '12345678', '7', 'Ⅻ', '½', '²', '１２３', 'ＡＢＣ',
  ' ', '  ', '   ', '    ', '\t', '\t\t', '\n', '\r\n', '\n\n', ' \n ', '\r', '\u00a0', '\u3000', '\u2028', '\u2029', '\u0085',
  '\v', '\f', '\u1680', '\u2003', '\u202f', '\u200b', '\u200d', '\ufeff', '\x00', '\x7f', '\x1b', '\u00ad',
  '.', ',', '!!!', '...', '?!', '--', '—', '“quoted”', '«»', '$', '€100', '+', '=', '^', '`', '@user', '#tag',
  '.NET', "'hello", '_private', '\\n', '/path/to/file', '∑x²', '→', 'ℝ', '%', '©', '™', '¿', '、', '。', '！',
];
const ranges = [[0x20, 0x7e], [0x00, 0x20], [0xa0, 0x2ff], [0x300, 0x36f], [0x370, 0x7ff], [0x900, 0xdff], [0x1100, 0x11ff],
  [0x2000, 0x206f], [0x2070, 0x2bff], [0x3000, 0x30ff], [0x4e00, 0x9fff], [0xac00, 0xd7a3], [0xe000, 0xffff], [0x10000, 0x1ffff], [0xe0000, 0xe007f]];

let seed = 20241205;
function rnd() { // mulberry32
  seed = (seed + 0x6D2B79F5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (n) => Math.floor(rnd() * n);

const texts = [];
for (let i = 0; i < 1500; i++) {
  let s = '';
  const k = 1 + pick(i < 1000 ? 10 : 40);
  for (let j = 0; j < k; j++) {
    if (pick(4) === 0) {
      const [lo, hi] = ranges[pick(ranges.length)];
      const r = lo + pick(hi - lo + 1);
      if (r >= 0xd800 && r <= 0xdfff) continue;
      s += String.fromCodePoint(r);
    } else {
      s += fragments[pick(fragments.length)];
    }
  }
  texts.push(s);
}

const out = { texts, pieces: {} };
for (const [name, p] of Object.entries(patterns)) {
  const pt = preTokenizer(p);
  out.pieces[name] = texts.map((t) => pt.preTokenizeString(t).map(([piece]) => Buffer.byteLength(piece)));
}
out.patterns = patterns;
process.stdout.write(JSON.stringify(out) + '\n');
