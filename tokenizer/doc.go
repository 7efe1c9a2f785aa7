// Package tokenizer encodes text to token ids and decodes ids to text from a
// Hugging Face tokenizer.json, giving exactly the ids and text Hugging Face
// tokenizers (the Rust library) gives for the same file.
//
// # What is supported
//
// Load reads a model directory: tokenizer.json, plus tokenizer_config.json
// (chat template, BOS/EOS tokens, add_bos_token) and generation_config.json
// (eos_token_id) when present. The pipeline is Hugging Face's:
//
//  1. Added tokens are split out of the raw text, leftmost-longest, honouring
//     single_word, lstrip and rstrip; those marked normalized are matched
//     after normalization instead. Special tokens written in user text are
//     matched as special tokens (split_special_tokens=false).
//  2. Normalizers: NFC, NFKC, NFD, NFKD, Prepend, Replace (literal pattern),
//     Sequence.
//  3. Pre-tokenizers: Split (behavior Isolated; Regex patterns come from
//     package tokenizer/split, which implements the Qwen2/3, Llama 3, GPT-2
//     and DeepSeek V3 patterns by hand), ByteLevel (last in the chain),
//     Metaspace, Sequence.
//  4. Model: BPE with merges as "a b" strings or [a, b] pairs, ignore_merges,
//     byte_fallback, unk_token and fuse_unk.
//  5. Post-processors (applied only when Encode's addSpecial is true):
//     TemplateProcessing (single), ByteLevel, RobertaProcessing,
//     BertProcessing, Sequence.
//
// Decoders: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip,
// Sequence. Invalid UTF-8 decodes to U+FFFD per maximal invalid subpart, as
// Rust's from_utf8_lossy.
//
// Anything else (a WordPiece or Unigram model, an unknown component type, an
// option such as a Split behavior other than Isolated, a Regex Replace, BPE
// dropout or a subword prefix, truncation or padding) is refused at load with
// an error naming the component, for example
//
//	cannot load tokenizer: pre_tokenizer type "Whitespace" is not supported
//
// rather than encoding differently from Hugging Face.
//
// # Performance
//
// Merges are applied by rank from an open-addressing table keyed by the
// (left id, right id) pair: by linear scans over cached pair ranks for words
// of up to 64 symbols and with a min-heap beyond. A byte-level word starts
// from a 256-entry byte-to-id table, so the byte-level alphabet is only
// materialized for ignore_merges' whole-word lookup. Each pre-tokenized piece
// of up to 32 bytes is looked up first in a word cache.
//
// # Concurrency and memory
//
// A Tokenizer is immutable after Load and safe for concurrent use. Encode's
// working buffers come from a sync.Pool, and the word cache is a fixed-size,
// direct-mapped table (64 mutex-guarded shards, about 5 MB): a colliding
// insert evicts, so memory never grows with the traffic. In steady state
// Encode allocates nothing, on a cache hit or a miss.
//
// # Buffer ownership
//
// Encode appends to the dst slice it is given and Decode to the dst byte
// slice; both return the extended slice, like append, and keep no reference
// to it or to the input. Slices returned by accessors (EOSTokenIDs) belong to
// the Tokenizer and must not be modified.
package tokenizer
