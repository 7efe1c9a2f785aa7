// Package stream is the streaming detokenizer: it turns the token ids a
// gRPC engine streams for one choice into the text chunks sent as OpenAI
// server-sent events, with the request's stop rules applied.
//
// # Incremental decoding
//
// DecodeStream follows Hugging Face tokenizers' DecodeStream::step
// (tokenizers/src/tokenizer/mod.rs), the algorithm vLLM, SGLang and SMG
// also use. It keeps the ids of a window, a read offset and the text of the
// ids before it. Each Step appends the id, decodes the window and emits the
// text past the previous text only when the text grew and does not end in
// U+FFFD or an incomplete UTF-8 sequence; then the window slides so the ids
// that just produced text become the left context for the next step. So:
//
//   - A character split over byte tokens (Llama 3 / Qwen byte-level BPE,
//     SentencePiece byte fallback) is emitted once, whole, by the token
//     that completes it; no chunk ever carries half a character.
//   - Decoders whose output depends on the left context (SentencePiece
//     drops the leading space of a decode) still produce the text one
//     Decode of all ids gives: the concatenation of every chunk plus Flush
//     equals Decode(all ids) for decoders whose shorter text is a prefix of
//     the longer one, which byte-level and SentencePiece decoders are.
//   - A skipped special token produces no text. When the Decoder also has
//     IsSpecial(id uint32) bool (tokenizer.Tokenizer does), skipped special
//     ids are not even added to the window: HF's decode drops them before
//     decoding, so the text is the same and a run of them costs nothing.
//   - Flush emits what the pending ids decode to, as Decode(all) would end
//     (an incomplete tail usually as U+FFFD).
//
// Each step costs one Decode of the window (a few ids), and one more when
// text is emitted to compute the new prefix text, as in HF. The window only
// grows while the text does not (a character split over tokens, or text
// ending in a real U+FFFD), so it stays a few ids long in practice.
//
// # Stop rules
//
// StopDecoder wraps a DecodeStream with the OpenAI `stop` semantics ("the
// returned text will not contain the stop sequence") and SGLang's
// extensions, following SMG's StopSequenceDecoder (crates/tokenizer/src/
// stop.rs) and create_stop_decoder (model_gateway/src/routers/grpc/utils/
// chat_utils.rs):
//
//   - Stop strings: the text ends at the first occurrence; the string is
//     hidden, or kept with NoStopTrim (SGLang no_stop_trim). Of several,
//     the one that ends first wins (what a token-by-token check finds
//     first), the earlier start on a tie. Only the longest tail that is a
//     proper prefix of some stop string is held back, and it is released as
//     soon as it cannot be one (SMG holds a fixed window of the longest stop
//     string's length instead; the text sent is the same, only sooner).
//   - StopTokenIDs always stop; EOSTokenIDs stop unless IgnoreEOS (SMG
//     drops only EOS ids under ignore_eos, as vLLM does). The stop token's
//     text is not sent, unless NoStopTrim: then it is decoded like any other
//     token, so a special token such as <|im_end|> still disappears under
//     skip_special_tokens, as in SGLang, whose detokenizer drops the
//     matched token id unless no_stop_trim and decodes the rest. Before
//     stopping, pending bytes are flushed and held text is released, so the
//     output equals the non-streaming output.
//   - skip_special_tokens defaults to true (OpenAI/SGLang); Options has its
//     negation, KeepSpecialTokens, so the zero Options is the default.
//   - Flush, called when the stream ends for another reason (length,
//     abort), releases held text; a stop string it completes still counts.
//
// The text a StopDecoder sends over Steps and Flush is exactly Decode of the
// ids up to the stop token (including it under NoStopTrim), cut at the stop
// string as above; the tests check this against that non-streaming
// definition.
//
// # Concurrency and buffers
//
// One decoder per choice; a decoder is not safe for concurrent use, and the
// Decoder it wraps must be safe to share (tokenizers are read-only). Step
// and Flush append to the caller's dst and return it, like strconv.Append*:
// the caller owns dst, the decoder never keeps it. The decoder keeps its own
// buffers across Reset, so decoders taken from a sync.Pool do not allocate
// per token once warm; Reset copies the Options, so the request may be
// freed.
package stream
