package extract

import "github.com/smg-go/smg/internal/jsonscan"

// Route names the endpoint a body was posted to; it decides which keys carry the routing
// text.
type Route uint8

const (
	// RouteChat is POST /v1/chat/completions: the routing text is built from "messages".
	RouteChat Route = iota + 1
	// RouteCompletions is POST /v1/completions: the routing text or token IDs come from
	// "prompt".
	RouteCompletions
	// RouteGenerate is SGLang's native POST /generate: "text" and "input_ids".
	RouteGenerate
	// RouteEmbeddings is POST /v1/embeddings: "input", read like a completions "prompt".
	RouteEmbeddings
	// RouteRerank is POST /v1/rerank and /rerank: the routing text is "query".
	RouteRerank
	// RouteClassify is POST /v1/classify: "input", read like a completions "prompt".
	RouteClassify
	// RouteTokenize is POST /v1/tokenize: "prompt", read like a completions "prompt".
	RouteTokenize
	// RouteDetokenize is POST /v1/detokenize: the token IDs of "tokens".
	RouteDetokenize
	// RouteResponses is POST /v1/responses: "input", a string or input items read like chat
	// messages.
	RouteResponses
	// RouteMessages is the Anthropic POST /v1/messages: "system", then "messages" read like
	// chat messages.
	RouteMessages
	numRoutes
)

// String returns the path the route serves, for logs and test names.
func (r Route) String() string {
	switch r {
	case RouteChat:
		return "/v1/chat/completions"
	case RouteCompletions:
		return "/v1/completions"
	case RouteGenerate:
		return "/generate"
	case RouteEmbeddings:
		return "/v1/embeddings"
	case RouteRerank:
		return "/v1/rerank"
	case RouteClassify:
		return "/v1/classify"
	case RouteTokenize:
		return "/v1/tokenize"
	case RouteDetokenize:
		return "/v1/detokenize"
	case RouteResponses:
		return "/v1/responses"
	case RouteMessages:
		return "/v1/messages"
	}
	return "unknown route"
}

// Fields holds what routing needs from one request body. A Fields is owned by one request
// at a time: the gateway pools them and Extract overwrites every field, reusing the
// capacity of the buffers it owns, so a warmed-up Fields extracts without allocating.
//
// Byte slices either alias the request body (a string without escapes) or one of the
// Fields' own buffers (a decoded string, the joined chat text). Both
// stay valid until the next Extract or Reset on this Fields, and the aliases only as long
// as the caller neither modifies nor recycles the body. Treat them as read-only: copy
// what must outlive the request.
type Fields struct {
	// Model is the top-level "model" string, JSON-decoded. HasModel tells an absent or
	// null "model" from an empty string.
	Model    []byte
	HasModel bool

	// Stream is the top-level "stream" boolean; absent or null means false.
	Stream bool

	// Rid is the top-level "rid" (request ID) string, or the first element when "rid" is
	// an array of strings. Empty means absent: an empty key routes nothing.
	Rid []byte

	// Text is the routing text, JSON-decoded. See the package documentation for how each
	// route builds it and for invalid UTF-8. Empty means the request carries no text.
	Text []byte

	// InputIDs are the token IDs of /generate "input_ids" or of a completions "prompt"
	// given as token IDs (the first sequence of a batch). Empty means none.
	InputIDs []uint32

	textBuf  []byte // Text when it is built or decoded rather than aliased
	sysBuf   []byte // the Anthropic "system" text, joined before Text when the body is done
	modelBuf []byte // Model when it needed decoding
	ridBuf   []byte // Rid when it needed decoding
	scratch  []byte // escaped member names and short strings, decoded to compare them

	// kinds is the container stack of skipValue, one bit per nesting level (1 = object),
	// kept here rather than on the goroutine stack so that skipping a value costs no
	// 1.25 KB zeroing and deep nesting needs no recursion.
	kinds jsonscan.Stack
}

// Reset clears the fields and drops the aliases into the last body, so a pooled Fields
// does not keep a large body alive. It keeps the capacity of the buffers it owns.
func (f *Fields) Reset() {
	f.Model = nil
	f.HasModel = false
	f.Stream = false
	f.Rid = nil
	f.Text = nil
	f.InputIDs = f.InputIDs[:0]
	f.textBuf = f.textBuf[:0]
	f.sysBuf = f.sysBuf[:0]
	f.modelBuf = f.modelBuf[:0]
	f.ridBuf = f.ridBuf[:0]
	f.scratch = f.scratch[:0]
}
