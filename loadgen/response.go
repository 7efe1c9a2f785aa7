package loadgen

import (
	"github.com/valyala/fastjson"
)

// usage is the token accounting a server reported for one request.
type usage struct {
	reported         bool
	promptTokens     int
	completionTokens int
	cachedTokens     int
}

// payload is what one JSON payload (a stream event or a whole response body) says.
type payload struct {
	// text is the payload's generated text: chat delta.content or message.content,
	// completions choices[0].text, /generate "text" (cumulative in /generate streams). It is
	// a view into the parser's memory, valid until the parser parses again.
	text  []byte
	usage usage
	// failed is set when the payload is an error object ({"error": ...}) instead of output.
	failed bool
}

// parsePayload decodes one payload of endpoint ep with p (reused: no allocation in steady
// state). It returns an error only when data is not JSON.
func parsePayload(p *fastjson.Parser, ep Endpoint, data []byte) (payload, error) {
	v, err := p.ParseBytes(data)
	if err != nil {
		return payload{}, err
	}
	var out payload
	if e := v.Get("error"); e != nil && e.Type() != fastjson.TypeNull {
		out.failed = true
		return out, nil
	}
	switch ep {
	case EndpointGenerate:
		out.text = v.GetStringBytes("text")
		if m := v.Get("meta_info"); m != nil && m.Type() == fastjson.TypeObject {
			out.usage = usage{
				reported:         true,
				promptTokens:     m.GetInt("prompt_tokens"),
				completionTokens: m.GetInt("completion_tokens"),
				cachedTokens:     m.GetInt("cached_tokens"),
			}
		}
		return out, nil
	case EndpointCompletions:
		out.text = v.GetStringBytes("choices", "0", "text")
	default:
		if out.text = v.GetStringBytes("choices", "0", "delta", "content"); out.text == nil {
			out.text = v.GetStringBytes("choices", "0", "message", "content")
		}
	}
	if u := v.Get("usage"); u != nil && u.Type() == fastjson.TypeObject {
		out.usage = usage{
			reported:         true,
			promptTokens:     u.GetInt("prompt_tokens"),
			completionTokens: u.GetInt("completion_tokens"),
			cachedTokens:     u.GetInt("prompt_tokens_details", "cached_tokens"),
		}
	}
	return out, nil
}
