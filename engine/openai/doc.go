// Package openai turns the OpenAI routes' requests (/v1/chat/completions, /v1/completions)
// and SGLang's /generate into a gRPC engine generation (grpcworker.GenerateRequest), and the
// engine's chunk stream back into the answer SGLang's own OpenAI server gives: the same JSON
// objects, field for field, and the same server-sent events.
//
// # Requests
//
// Parse reads a body into a Request: the model, stream flags, n, the stop rules and every
// sampling field, with SGLang's defaults and range checks (a bad value is an *Error, answered
// 400 with the field as param). Request.Prompt renders the chat template and encodes the
// prompt (chat, completions text, /generate text) or takes the given ids (completions token
// prompts, /generate input_ids); a longer prompt than the model takes is an *Error too.
// Request.Fill writes the GenerateRequest: only the fields the client set override the
// engine's defaults (grpcworker.Opt), except completions' max_tokens, which defaults to 16
// as in SGLang and OpenAI.
//
// # Answers
//
// A Writer runs one request's answer. Feed takes each grpcworker.Chunk, runs every choice's
// token ids through its own stop-aware detokenizer (tokenizer/stream.StopDecoder: stop
// strings hidden unless no_stop_trim, stop token ids, EOS unless ignore_eos,
// skip_special_tokens) and, for a streamed request, appends the events to send now: for chat
// a role chunk first per choice, content deltas, a finish chunk per choice with finish_reason
// and matched_stop; for completions text chunks, the last with its finish_reason. End
// appends the rest: the usage chunk (stream_options.include_usage) and "data: [DONE]", or
// the whole JSON body of an unstreamed request. A choice the detokenizer finished (a stop
// string the engine has not reported yet) is finished at once; Done reports when every
// choice is, so the caller can close the engine's stream (which aborts it).
//
// # Allocation and buffers
//
// Feed and End append to the caller's dst and allocate nothing once a Writer's buffers have
// grown (Writers are meant to be pooled: Reset keeps them). A Request's slices alias the body
// it was parsed from or its own buffers; a Request is reusable through Reset.
//
// # Concurrency
//
// Neither type is safe for concurrent use: one request, one goroutine (the relay). Both are
// pure: no I/O, no clock (the caller passes the id and the creation time).
package openai
