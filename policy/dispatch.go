package policy

// BytesPerToken is the routing text's bytes per token assumed for a request without token
// ids: about what BPE tokenizers average on English text, and what the mock engines count.
const BytesPerToken = 4

// DispatchTokens returns the token count the gateway credits to the worker it sends req to
// (worker.Hold.Begin): the request's token ids when it carries them, else its routing text's
// length over BytesPerToken, else -1 (unknown, credited at MeanPrefillTokens). The spec
// credits every request without token ids at the mean, so a prompt 30 times longer than the
// rest counted as one more request and least_load kept queueing behind it (see
// docs/differences.md).
func DispatchTokens(req *Request) int {
	switch {
	case req.Tokens != nil:
		return len(req.Tokens)
	case len(req.Text) > 0:
		return max(1, len(req.Text)/BytesPerToken)
	}
	return -1
}
