// Package chat renders Hugging Face chat templates: the Jinja templates in a
// model's tokenizer_config.json that turn an OpenAI chat request into the
// prompt text the model was trained on. The output is meant to be byte for
// byte what transformers' apply_chat_template produces with Python jinja2,
// since one differing space or newline changes the tokens the model sees.
//
// # Use
//
//	tmpl, err := chat.FromTokenizerConfig(configJSON) // or chat.Compile(source, opts...)
//	req, err := chat.DecodeRequest(body)              // OpenAI /v1/chat/completions body
//	prompt, err := tmpl.Render(buf[:0], req)
//
// Every error from Compile, FromTokenizerConfig, DecodeRequest and Render is
// a *TemplateError: a template that does not parse, a malformed request, or
// a template that rejected the request with raise_exception. The gateway
// answers them with HTTP 400 and the error's message. Render recovers from
// panics in the template engine and reports them the same way.
//
// # Hugging Face semantics
//
// Templates run on github.com/ardanlabs/jinja (loop controls, namespace,
// {% generation %} as a no-op come from it). Compile rewrites the source
// before the engine sees it, to add what transformers defines and the engine
// lacks or does differently:
//
//   - Whitespace control is applied by this package exactly as jinja2's lexer
//     applies it with trim_blocks=True and lstrip_blocks=True ("-" and "+"
//     markers included), and template text reaches the engine as string
//     literals: the engine's own trimming reaches across neighbouring tags
//     and would drop newlines jinja2 keeps.
//   - keep_trailing_newline=False: one trailing newline of the source is
//     dropped; \r\n and \r are read as \n, as jinja2 does. String literals
//     in tags take Python's escapes (\xhh, \uXXXX, \r, ...).
//   - {{ value }}, the string filter, the operands of ~ and the items of the
//     join filter are converted with Python's str(): None, True/False, floats
//     in repr form (1.0, 1e-05), lists and dicts in repr form with Python's
//     string quoting. Undefined converts to "".
//   - The tojson filter is transformers' json.dumps(x, ensure_ascii=False,
//     indent=None, separators=None, sort_keys=False): ", " and ": "
//     separators, (",", ": ") with indent, no HTML escaping, object keys in
//     their original order unless sort_keys.
//   - raise_exception(msg) fails the render with a TemplateError whose Msg is
//     msg; strftime_now(fmt) formats the current time (WithClock) with
//     Python's strftime directives.
//
// Templates see these variables, as transformers passes them: messages,
// tools and documents (none when the request has none), add_generation_prompt,
// the tokenizer's special tokens (bos_token, eos_token, ...; see
// WithSpecialTokens), then reasoning_effort and tool_choice when the request
// has them, then every key of chat_template_kwargs (enable_thinking and any
// other), each later source overriding earlier ones.
//
// Two request rewrites follow SMG's chat preparation so that templates get
// the shapes they are written for:
//
//   - Content given as a list of parts is flattened to its text parts joined
//     with " " for templates that treat content as a string (most of them:
//     Qwen3, Llama 3, DeepSeek V3 concatenate it). Templates that loop over,
//     index or measure message content get the parts unchanged. The choice is
//     made from the template source (ContentFormat, WithContentFormat).
//   - tool_calls[].function.arguments, which OpenAI sends as a JSON string, is
//     parsed into an object for templates that read it as one (apply tojson
//     or items to it, or test it with "is string"/"is mapping"), as SMG,
//     SGLang and vLLM do; malformed JSON there is an input error. Templates
//     that only splice arguments into text (DeepSeek V3) get the string,
//     because jinja2 cannot add a dict to a string
//     (ParsesToolArguments, WithToolArguments).
//
// Known differences from jinja2 (testdata/syntax.jsonl holds the features
// that do match). The engine is more lenient where jinja2 raises: "+" with a
// string converts the other side with Go's formatting, so an assistant
// message with content null and tool_calls renders in Qwen3-style templates
// as if content were "" (jinja2 raises TypeError; vLLM turns such content
// into "" before rendering); attribute access on undefined is undefined;
// list.append and dict methods are allowed where transformers' immutable
// sandbox forbids them. Number literals need a fraction before an exponent
// (1.0e16, not 1e16); "}}" inside a tag ends it even within braces
// ({'a': {}}); ** yields a float; "%" string formatting, tuples (they are
// lists) and filters binding tighter than unary minus differ; JSON integers
// beyond int64 become floats; a namespace() built with several keyword
// arguments does not keep their order.
//
// # Why ordered JSON
//
// Templates iterate objects (tool parameter schemas, chat_template_kwargs)
// and serialise them with tojson; Python dicts keep insertion order, so the
// prompt lists keys in the order the client sent them. Go maps do not keep
// order, so request JSON is decoded with DecodeJSON straight into the
// engine's ordered dict values instead of through map[string]any.
//
// # Concurrency and cost
//
// A Template is immutable after Compile and safe for concurrent use; compile
// each model's template once. Render does not modify the Request (messages
// it rewrites are copied), so one Request may be rendered by several
// goroutines at once, provided the template does not call mutating methods
// (which transformers' sandbox rejects anyway). Rendering allocates per
// call; the engine's loop bookkeeping and boxed values dominate.
//
// Templates are trusted configuration: the engine bounds neither recursion
// (a macro calling itself) nor sizes (range, string repetition), so a
// template supplied by a client must not be rendered with this package.
package chat
