package mockworker

import (
	"strconv"

	"github.com/valyala/fastjson"
)

// The engine routes besides generation that a gateway forwards as they are (embeddings,
// rerank, classify, tokenize, detokenize, the Responses and Anthropic Messages APIs). Both
// dialects serve all of them, with small answers of the engines' shapes; each answer names
// the route it served in "mock_route", so that tests see which route a gateway forwarded to.
// The x-mock-fault header's status=NNN applies as on generation routes.

// passthroughKind says which answer a pass-through route gives.
type passthroughKind uint8

const (
	ptEmbeddings passthroughKind = iota
	ptRerank
	ptClassify
	ptTokenize
	ptDetokenize
	ptResponses
	ptMessages
)

// passthroughRoute maps a path to its kind; ok is false for other paths.
func passthroughRoute(path []byte) (passthroughKind, bool) {
	switch string(path) {
	case "/v1/embeddings":
		return ptEmbeddings, true
	case "/v1/rerank", "/rerank":
		return ptRerank, true
	case "/v1/classify", "/classify":
		return ptClassify, true
	case "/v1/tokenize", "/tokenize":
		return ptTokenize, true
	case "/v1/detokenize", "/detokenize":
		return ptDetokenize, true
	case "/v1/responses":
		return ptResponses, true
	case "/v1/messages":
		return ptMessages, true
	}
	return 0, false
}

// passthrough answers one pass-through request.
func (w *Worker) passthrough(ex *exchange, dst []byte, kind passthroughKind) reply {
	if string(ex.method) != "POST" {
		return methodNotAllowed(dst)
	}
	f, err := parseFault(ex.fault)
	if err != nil {
		return badRequest(dst, err)
	}
	if f.status == 0 {
		f.status = w.admin.Load().Status
	}
	if f.status != 0 {
		return reply{status: f.status, contentType: contentJSON,
			body: appendErrorBody(dst, f.status, "mock_fault", "mockworker injected status "+strconv.Itoa(f.status))}
	}
	p := w.parsers.Get()
	defer w.parsers.Put(p)
	v, err := p.ParseBytes(ex.body)
	if err != nil || v.Type() != fastjson.TypeObject {
		return badRequest(dst, errNotObject)
	}
	tokens := (len(ex.body) + bytesPerToken - 1) / bytesPerToken
	r := reply{status: 200, contentType: contentJSON}
	if (kind == ptResponses || kind == ptMessages) && v.GetBool("stream") {
		r.contentType = contentSSE
		r.body = w.appendPassthroughEvents(dst, ex.path, kind)
		return r
	}
	dst = append(dst, `{"mock_route":"`...)
	dst = append(dst, ex.path...)
	dst = append(dst, `","model":"`...)
	dst = append(dst, w.model...)
	dst = append(dst, `",`...)
	switch kind {
	case ptEmbeddings:
		dst = append(dst, `"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2,0.3,0.4]}],`...)
	case ptRerank:
		dst = append(dst, `"results":[{"index":0,"relevance_score":0.9},{"index":1,"relevance_score":0.1}],`...)
	case ptClassify:
		dst = append(dst, `"object":"list","data":[{"index":0,"label":"mock","probs":[0.9,0.1],"num_classes":2}],`...)
	case ptTokenize:
		dst = append(dst, `"tokens":[`...)
		for i := range min(tokens, 64) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, int64(100+i), 10)
		}
		dst = appendKeyInt(dst, `],"count":`, int64(min(tokens, 64)))
		dst = appendKeyInt(dst, `,"max_model_len":`, int64(w.cfg.KVTokens))
		dst = append(dst, ',')
	case ptDetokenize:
		dst = append(dst, `"text":"the mock cat",`...)
	case ptResponses:
		dst = append(dst, `"id":"resp-mock-`...)
		dst = strconv.AppendUint(dst, w.seq.Add(1), 10)
		dst = append(dst, `","object":"response","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"the mock cat"}]}],`...)
	case ptMessages:
		dst = append(dst, `"id":"msg_mock_`...)
		dst = strconv.AppendUint(dst, w.seq.Add(1), 10)
		dst = append(dst, `","type":"message","role":"assistant","content":[{"type":"text","text":"the mock cat"}],"stop_reason":"max_tokens",`...)
	}
	dst = appendKeyInt(dst, `"usage":{"prompt_tokens":`, int64(tokens))
	dst = appendKeyInt(dst, `,"total_tokens":`, int64(tokens))
	r.body = append(dst, `}}`...)
	return r
}

// appendPassthroughEvents writes a short streamed answer of the Responses or Messages API.
func (w *Worker) appendPassthroughEvents(dst, path []byte, kind passthroughKind) []byte {
	route := string(path)
	if kind == ptResponses {
		dst = append(dst, "event: response.created\ndata: {\"type\":\"response.created\",\"mock_route\":\""+route+"\"}\n\n"...)
		dst = append(dst, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"the mock cat\"}\n\n"...)
		return append(dst, "event: response.completed\ndata: {\"type\":\"response.completed\"}\n\n"...)
	}
	dst = append(dst, "event: message_start\ndata: {\"type\":\"message_start\",\"mock_route\":\""+route+"\"}\n\n"...)
	dst = append(dst, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"the mock cat\"}}\n\n"...)
	return append(dst, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
}

// appendServerInfo writes SGLang's /get_server_info (a few of its server_args).
func (w *Worker) appendServerInfo(dst []byte) []byte {
	dst = append(dst, `{"server_args":{"model_path":"`...)
	dst = append(dst, w.model...)
	dst = append(dst, `","served_model_name":"`...)
	dst = append(dst, w.model...)
	dst = appendKeyInt(dst, `","tp_size":1,"dp_size":1},"scheduler_info":{"max_total_num_tokens":`, int64(w.cfg.KVTokens))
	dst = append(dst, `},"engine":"`...)
	dst = append(dst, w.cfg.Dialect...)
	return append(dst, `","version":"mock"}`...)
}
