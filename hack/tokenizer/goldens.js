// Regenerates tokenizer/testdata/golden/<family>.jsonl.gz: a deterministic corpus of at least
// 5,000 strings per model family, with the ids and decodes Hugging Face tokenizers itself
// (its Node binding, @anush008/tokenizers 0.6.0) gives for each.
//
//   bash hack/tokenizer/fetch.sh && node hack/tokenizer/goldens.js
//
// Each line: {"text", "ids" (add_special_tokens=false), "ids_special" (true),
// "decoded" (decode(ids_special, skip_special_tokens=false)), "decoded_skip" (true)}.
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');
const os = require('os');

const data = process.env.SMG_TOKENIZER_DATA || path.join(os.homedir(), '.cache/smg-tokenizers/v1');
const { Tokenizer } = require(path.join(data, 'npm/node_modules/@anush008/tokenizers'));
const out = path.join(__dirname, '../../tokenizer/testdata/golden');
const families = ['qwen3', 'llama3', 'llama2', 'deepseek_v3'];

// mulberry32: a small seeded generator, so the corpus is the same on every run.
function rng(seed) {
  return () => {
    seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = rng(20261205);
const pick = (a) => a[Math.floor(rand() * a.length)];
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
const rep = (n, f) => Array.from({ length: n }, f).join('');

const english = `The quick brown fox jumps over the lazy dog. It's a truth universally acknowledged that
a single man in possession of a good fortune must be in want of a wife. I'll be there; we've
seen they're right, she'd say, you'll know. Don't WON'T Shouldn't O'Neil's rock'n'roll 'tis.
Large language models route requests to workers; the gateway picks a worker with the least load.
Hello, world! Mr. Smith paid $1,234.56 on 2024-03-15 at 10:30am (UTC+8) for 3.5kg of apples.
e-mail: someone@example.com https://example.org/path?q=1&r=two#frag CamelCaseIdentifier snake_case_name
ALL CAPS SHOUTING and MiXeD cAsE, naïve café résumé coöperate Ångström façade Zürich São Paulo`.split(/\s+/);
const chinese = '的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去行过家十用发天如然作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定见只主没公从人工智能模型推理网关路由缓存词元中文测试'.split('');
const japanese = 'あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんアイウエオカキクケコサシスセソタチツテトガギグゲゴパピプペポー日本語東京大阪今日天気学校先生漢字'.split('');
const arabic = 'مرحبا بالعالم هذا نص عربي للاختبار الذكاء الاصطناعي نموذج لغوي كبير ١٢٣ ٤٥٦ ٧٨٩ السلام عليكم'.split(' ');
const korean = '안녕하세요 세계 한국어 텍스트 토크나이저 테스트 입니다'.split(' ');
const others = ['Привет', 'мир', 'Γειά', 'σου', 'Κόσμε', 'שלום', 'नमस्ते', 'दुनिया', 'สวัสดี', 'ሰላም', 'Tiếng', 'Việt', 'Ⅻ', '²³', '½', '٣', '௰', 'ﬁ', 'Ａｂｃ１２３', 'ｶﾀｶﾅ', '㍿', 'ℌ', 'ǅ', 'ß', 'ẞ', 'ſ', 'İ', 'ı'];
const emoji = ['😀', '👍', '👍🏽', '🇺🇸', '🇯🇵', '👨‍👩‍👧‍👦', '🧑‍💻', '🏳️‍🌈', '❤️', '✨', '🔥', '🤖', '🙂', '👩🏾‍🚀', '1️⃣', '#️⃣', '🫠', '🪿', '©', '™', '↔', '∑', '∞', '≠', '√', 'π', '€', '£', '¥', '₿'];
const code = [
  'def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n',
  'func main() {\n\tfmt.Println("hello, 世界")\n\tfor i := 0; i < 10; i++ {\n\t\tx[i] = i*i\n\t}\n}\n',
  'const x = {a: 1, "b": [2, 3], c: null}; // comment\nif (x.a !== undefined && x.b?.length >= 2) { console.log(`${x.a}`); }\n',
  '#include <stdio.h>\nint main(void) {\n    printf("%d\\n", 42);\n    return 0;\n}\n',
  'SELECT id, name FROM users WHERE age >= 18 AND name LIKE \'%smith%\' ORDER BY id DESC LIMIT 10;',
  '<div class="row"><span id=\'x\'>&amp; &lt;tag&gt;</span></div>\n',
  '{"model": "qwen3", "messages": [{"role": "user", "content": "hi"}], "stream": true}',
  '    indented\n\t\ttabbed\r\n\r\nwindows\rlines   trailing   \n\n\n',
  'x=1;y=2;z=x+y*3-4/5%6**7//8|9&10^11~12<<13>>14',
  '```python\nprint("hi")\n```\n| col | col2 |\n|-----|------|\n| 1   | 2    |\n',
];
const spaces = [' ', '  ', '   ', '    ', '\t', '\t\t', '\n', '\n\n', '\r\n', ' \n', '\n ', '\u00a0', '\u3000', '\u2003', '\u200b', '\u200d', '\ufeff', '        ', ' \t \n'];
const punct = '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~，。！？、「」『』（）《》…—'.split('');

function specials(tok) {
  // The added tokens' own text, so special-token text inside user text is covered.
  const toks = JSON.parse(fs.readFileSync(tok, 'utf8')).added_tokens.map((t) => t.content);
  return toks.slice(0, 40);
}

function piece(sp) {
  switch (int(0, 15)) {
    case 0: case 1: case 2: return rep(int(1, 12), () => pick(english) + ' ').trimEnd();
    case 3: return rep(int(1, 20), () => pick(chinese));
    case 4: return rep(int(1, 15), () => pick(japanese));
    case 5: return rep(int(1, 6), () => pick(arabic) + ' ');
    case 6: return rep(int(1, 4), () => pick(korean) + ' ');
    case 7: return rep(int(1, 4), () => pick(others) + pick([' ', '', '-']));
    case 8: return rep(int(1, 6), () => pick(emoji) + pick(['', '', ' ']));
    case 9: return pick(code);
    case 10: return rep(int(1, 3), () => pick(spaces));
    case 11: return String(int(0, 1e9)) + pick(['', ' ', '.', ',']) + rep(int(0, 12), () => String(int(0, 9)));
    case 12: return rep(int(1, 5), () => pick(punct));
    case 13: return pick(sp);
    case 14: return '\ufffd' + pick(english) + (rand() < 0.5 ? '\ufffd\ufffd' : '');
    default: return pick(english).toUpperCase() + "'" + pick(['s', 'S', 'll', 'LL', 've', 'd', 'M', 're', 't']);
  }
}

function corpus(sp) {
  const texts = ['', ' ', '\n', 'a', 'Hello world', ' Hello', 'Hello  world', '   ', '\t\n', '12345678', '你好世界', '😀', sp.join(''), sp.join(' ')];
  while (texts.length < 5200) {
    const n = int(1, 8);
    let s = '';
    for (let i = 0; i < n; i++) s += piece(sp) + pick(['', ' ', ' ', '\n', '  ', '\t', '']);
    texts.push(s);
  }
  return texts;
}

(async () => {
  fs.mkdirSync(out, { recursive: true });
  for (const fam of families) {
    const file = path.join(data, fam, 'tokenizer.json');
    const tok = Tokenizer.fromFile(file);
    const texts = corpus(specials(file));
    const lines = [];
    for (const text of texts) {
      const plain = (await tok.encode(text, null, { addSpecialTokens: false })).getIds();
      const special = (await tok.encode(text, null, { addSpecialTokens: true })).getIds();
      lines.push(JSON.stringify({
        text, ids: Array.from(plain), ids_special: Array.from(special),
        decoded: await tok.decode(special, false), decoded_skip: await tok.decode(special, true),
      }));
    }
    fs.writeFileSync(path.join(out, fam + '.jsonl.gz'), zlib.gzipSync(lines.join('\n') + '\n', { level: 9 }));
    console.log(fam, texts.length, 'strings');
  }
})();
