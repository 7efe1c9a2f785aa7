// Regenerates hf_classes.json: the character classes exactly as Hugging Face
// tokenizers' Split regex engine (its Node binding) sees them, as sorted
// inclusive code point ranges per class, plus which runes the case-insensitive
// contraction group accepts after the apostrophe. TestHFClasses checks the Go
// tables against it and genoverrides.go turns the differences into
// overrides.go.
//
//   node tokenizer/split/testdata/hfclasses.js > tokenizer/split/testdata/hf_classes.json
'use strict';
const path = require('path');
const os = require('os');
const data = process.env.SMG_TOKENIZER_DATA || path.join(os.homedir(), '.cache/smg-tokenizers/v1');
const { Tokenizer } = require(path.join(data, 'npm/node_modules/@anush008/tokenizers'));

function preTokenizer(p, behavior) {
  return Tokenizer.fromString(JSON.stringify({
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
    pre_tokenizer: { type: 'Split', pattern: { Regex: p }, behavior, invert: false },
    post_processor: null, decoder: null,
    model: { type: 'WordLevel', vocab: { '[UNK]': 0 }, unk_token: '[UNK]' },
  })).getPreTokenizer();
}

const cps = [];
for (let c = 0; c <= 0x10ffff; c++) if (c < 0xd800 || c > 0xdfff) cps.push(c);

// members returns the code points matched by a one-rune class: with behavior
// Isolated over "\uFFFF"-separated runes (U+FFFF is in none of the classes), a
// piece that is exactly one rune and the rune is not U+FFFF is a match.
function members(cls) {
  const pt = preTokenizer(cls, 'Removed');
  const inClass = new Uint8Array(0x110000);
  const chunk = 0x10000;
  for (let i = 0; i < cps.length; i += chunk) {
    const part = cps.slice(i, i + chunk);
    part.forEach((c) => { inClass[c] = 1; });
    // Removed drops the matches; what remains are the runes not in the class.
    const text = String.fromCodePoint(...part);
    for (const [piece] of pt.preTokenizeString(text)) {
      for (const ch of piece) inClass[ch.codePointAt(0)] = 0;
    }
  }
  const ranges = [];
  for (const c of cps) {
    if (!inClass[c]) continue;
    const last = ranges[ranges.length - 1];
    if (last && last[1] === c - 1) last[1] = c; else ranges.push([c, c]);
  }
  return ranges;
}

const out = { classes: {} };
for (const [name, cls] of [['L', '\\p{L}'], ['N', '\\p{N}'], ['M', '\\p{M}'], ['P', '\\p{P}'], ['S', '\\p{S}'], ['WS', '\\s']]) {
  out.classes[name] = members(cls);
}
// Which runes X make "'X" (or "'rX", "'Xe", ...) match the case-insensitive group.
const fold = preTokenizer("(?i:'s|'t|'re|'ve|'m|'ll|'d)", 'Isolated');
out.fold = {};
for (const [key, make] of [['s', (c) => "'" + c], ['t', (c) => "'" + c], ['m', (c) => "'" + c], ['d', (c) => "'" + c],
  ['r', (c) => "'" + c + 'e'], ['e', (c) => "'r" + c], ['v', (c) => "'" + c + 'e'], ['l', (c) => "'" + c + 'l'], ['l2', (c) => "'l" + c]]) {
  out.fold[key] = [];
}
// One pass per code point would be slow; test all runes at once, each framed by
// U+FFFF, and read back the matched pieces.
for (const [key, pre, post] of [['1', "'", ''], ['r', "'", 'e'], ['e', "'r", ''], ['v', "'", 'e'], ['l', "'", 'l'], ['l2', "'l", '']]) {
  const hits = new Set();
  for (let i = 0; i < cps.length; i += 0x8000) {
    const text = cps.slice(i, i + 0x8000).map((c) => '\uffff' + pre + String.fromCodePoint(c) + post).join('');
    for (const [piece] of fold.preTokenizeString(text)) {
      if (piece.startsWith("'")) hits.add(piece);
    }
  }
  out.fold[key] = [...hits].sort();
}
for (const k of ['s', 't', 'm', 'd']) delete out.fold[k];
process.stdout.write(JSON.stringify(out) + '\n');
