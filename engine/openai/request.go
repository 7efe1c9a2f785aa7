package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/smg-go/smg/engine/grpcworker"
	"github.com/smg-go/smg/tokenizer/stream"
)

// Kind is the route a request came on.
type Kind uint8

// The routes.
const (
	Chat       Kind = iota // /v1/chat/completions
	Completion             // /v1/completions
	Generate               // SGLang's /generate
)

// DefaultCompletionMaxTokens is /v1/completions' max_tokens when the request has none, as in
// SGLang's CompletionRequest and OpenAI's API; chat and /generate run to the context length.
const DefaultCompletionMaxTokens = 16

// Error is a request the engine must not see: answered 400 invalid_request_error with Param
// as the envelope's param.
type Error struct {
	Param string
	Msg   string
}

func (e *Error) Error() string { return e.Msg }

func badf(param, format string, args ...any) *Error {
	return &Error{Param: param, Msg: fmt.Sprintf(format, args...)}
}

// Request is what the gateway needs of one generation request. Strings alias the parsed body
// only through json.Unmarshal's copies, so a Request outlives its body.
type Request struct {
	Kind   Kind
	Model  string
	Rid    string
	Stream bool
	// IncludeUsage is stream_options.include_usage: a last chunk with the usage.
	IncludeUsage bool
	// N is the number of choices, 1 to grpcworker.MaxSamples.
	N int
	// Sampling is sent to the engine; Stop and StopTokenIDs in it also drive the detokenizer.
	Sampling   grpcworker.Sampling
	NoStopTrim bool
	// SkipSpecialTokens is skip_special_tokens (default true).
	SkipSpecialTokens bool
	// Text is the completions prompt or /generate text when the prompt is text.
	Text string
	// TextSet tells a text prompt from none.
	TextSet bool
	// InputIDs is the prompt given as token ids (completions token prompt, /generate
	// input_ids).
	InputIDs []uint32
}

// Reset clears r for reuse, keeping its slices' capacity.
func (r *Request) Reset() {
	ids, stop, stopIDs := r.InputIDs[:0], r.Sampling.Stop[:0], r.Sampling.StopTokenIDs[:0]
	*r = Request{InputIDs: ids}
	r.Sampling.Stop, r.Sampling.StopTokenIDs = stop, stopIDs
}

// body is the union of the three routes' fields; pointers tell absent from zero.
type body struct {
	Model               *string         `json:"model"`
	Rid                 json.RawMessage `json:"rid"`
	Stream              *bool           `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	N                   *int64          `json:"n"`
	Stop                json.RawMessage `json:"stop"`
	StopTokenIDs        []int64         `json:"stop_token_ids"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	MaxNewTokens        *int64          `json:"max_new_tokens"`
	MinTokens           *int64          `json:"min_tokens"`
	MinNewTokens        *int64          `json:"min_new_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *int64          `json:"top_k"`
	MinP                *float64        `json:"min_p"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	RepetitionPenalty   *float64        `json:"repetition_penalty"`
	Seed                *int64          `json:"seed"`
	IgnoreEOS           *bool           `json:"ignore_eos"`
	SkipSpecialTokens   *bool           `json:"skip_special_tokens"`
	NoStopTrim          *bool           `json:"no_stop_trim"`
	ResponseFormat      *responseFormat `json:"response_format"`
	Regex               *string         `json:"regex"`
	JSONSchema          json.RawMessage `json:"json_schema"`
	EBNF                *string         `json:"ebnf"`
	// Completions.
	Prompt json.RawMessage `json:"prompt"`
	Echo   *bool           `json:"echo"`
	// /generate.
	Text           json.RawMessage `json:"text"`
	InputIDs       json.RawMessage `json:"input_ids"`
	SamplingParams *body           `json:"sampling_params"`
}

type streamOptions struct {
	IncludeUsage *bool `json:"include_usage"`
}

type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

// Parse reads body, a request on route k, into r (reset first). Errors are *Error.
func Parse(k Kind, data []byte, r *Request) error {
	r.Reset()
	r.Kind, r.N, r.SkipSpecialTokens = k, 1, true
	var b body
	if err := json.Unmarshal(data, &b); err != nil {
		return badf("", "the request body is not a valid JSON object for this route: %v", err)
	}
	if b.Model != nil {
		r.Model = *b.Model
	}
	if len(b.Rid) > 0 && !isNull(b.Rid) {
		if err := json.Unmarshal(b.Rid, &r.Rid); err != nil {
			return badf("rid", "rid must be a string (one request id; batches are not served by gRPC workers)")
		}
	}
	if b.Stream != nil {
		r.Stream = *b.Stream
	}
	if b.StreamOptions != nil && b.StreamOptions.IncludeUsage != nil {
		r.IncludeUsage = *b.StreamOptions.IncludeUsage
	}
	if b.Echo != nil && *b.Echo {
		return badf("echo", "echo is not supported by gRPC workers; send the request without echo")
	}
	switch k {
	case Chat:
		if b.MaxCompletionTokens != nil {
			b.MaxTokens = b.MaxCompletionTokens // the newer name wins, as in OpenAI's API
		}
		if err := r.sampling(&b, "max_tokens"); err != nil {
			return err
		}
	case Completion:
		if b.MaxTokens == nil {
			d := int64(DefaultCompletionMaxTokens)
			b.MaxTokens = &d
		}
		if err := r.sampling(&b, "max_tokens"); err != nil {
			return err
		}
		if err := r.prompt(b.Prompt); err != nil {
			return err
		}
	case Generate:
		sp := b.SamplingParams
		if sp == nil {
			sp = &body{}
		}
		sp.MaxTokens = sp.MaxNewTokens
		if sp.MinNewTokens != nil {
			sp.MinTokens = sp.MinNewTokens
		}
		if err := r.sampling(sp, "sampling_params.max_new_tokens"); err != nil {
			return err
		}
		if err := r.generateInput(&b); err != nil {
			return err
		}
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// sampling reads the sampling fields of b (the body, or /generate's sampling_params).
func (r *Request) sampling(b *body, maxName string) error {
	if err := r.lengths(b, maxName); err != nil {
		return err
	}
	if err := r.distribution(b); err != nil {
		return err
	}
	s := &r.Sampling
	if b.IgnoreEOS != nil {
		s.IgnoreEOS = *b.IgnoreEOS
	}
	if b.SkipSpecialTokens != nil {
		r.SkipSpecialTokens = *b.SkipSpecialTokens
	}
	if b.NoStopTrim != nil {
		r.NoStopTrim = *b.NoStopTrim
	}
	if err := r.stop(b.Stop); err != nil {
		return err
	}
	for _, id := range b.StopTokenIDs {
		if id < 0 || id > math.MaxUint32 {
			return badf("stop_token_ids", "stop_token_ids has %d, which is not a token id", id)
		}
		s.StopTokenIDs = append(s.StopTokenIDs, uint32(id))
	}
	return r.constraint(b)
}

// lengths checks and maps how many answers and how many tokens each (n, max_tokens or
// max_completion_tokens as maxName, min_tokens).
func (r *Request) lengths(b *body, maxName string) error {
	s := &r.Sampling
	if b.N != nil {
		if *b.N < 1 || *b.N > grpcworker.MaxSamples {
			return badf("n", "n is %d; it must be between 1 and %d", *b.N, grpcworker.MaxSamples)
		}
		r.N = int(*b.N)
	}
	s.N = uint32(r.N)
	if b.MaxTokens != nil {
		if *b.MaxTokens <= 0 || *b.MaxTokens > math.MaxUint32 {
			return badf(maxName, "%s is %d; it must be a positive number of tokens", maxName, *b.MaxTokens)
		}
		s.MaxNewTokens = grpcworker.Some(uint32(*b.MaxTokens))
	}
	if b.MinTokens != nil {
		if *b.MinTokens < 0 || *b.MinTokens > math.MaxUint32 || s.MaxNewTokens.Set && uint32(*b.MinTokens) > s.MaxNewTokens.Value {
			return badf("min_tokens", "min_tokens is %d; it must be between 0 and the maximum number of tokens", *b.MinTokens)
		}
		s.MinNewTokens = uint32(*b.MinTokens)
	}
	return nil
}

// distribution checks and maps how each token is drawn: temperature, top_p, top_k, min_p,
// the penalties and the seed.
func (r *Request) distribution(b *body) error {
	s := &r.Sampling
	if b.Temperature != nil {
		if *b.Temperature < 0 || *b.Temperature > 1e6 {
			return badf("temperature", "temperature is %v; it must be 0 or more (0 is greedy)", *b.Temperature)
		}
		s.Temperature = grpcworker.Some(float32(*b.Temperature))
	}
	if b.TopP != nil {
		if !(*b.TopP > 0 && *b.TopP <= 1) {
			return badf("top_p", "top_p is %v; it must be in (0, 1]", *b.TopP)
		}
		s.TopP = grpcworker.Some(float32(*b.TopP))
	}
	if b.TopK != nil {
		if *b.TopK < -1 || *b.TopK == 0 || *b.TopK > math.MaxInt32 {
			return badf("top_k", "top_k is %d; it must be -1 (the whole vocabulary) or at least 1", *b.TopK)
		}
		s.TopK = grpcworker.Some(int32(*b.TopK))
	}
	if b.MinP != nil {
		if !(*b.MinP >= 0 && *b.MinP <= 1) {
			return badf("min_p", "min_p is %v; it must be in [0, 1]", *b.MinP)
		}
		s.MinP = grpcworker.Some(float32(*b.MinP))
	}
	for _, p := range []struct {
		v    *float64
		name string
		lo   float64
		hi   float64
		dst  *grpcworker.Opt[float32]
	}{
		{b.FrequencyPenalty, "frequency_penalty", -2, 2, &s.FrequencyPenalty},
		{b.PresencePenalty, "presence_penalty", -2, 2, &s.PresencePenalty},
		{b.RepetitionPenalty, "repetition_penalty", 0, 2, &s.RepetitionPenalty},
	} {
		if p.v == nil {
			continue
		}
		if !(*p.v >= p.lo && *p.v <= p.hi) || p.name == "repetition_penalty" && *p.v == 0 {
			return badf(p.name, "%s is %v; it must be in [%v, %v]", p.name, *p.v, p.lo, p.hi)
		}
		*p.dst = grpcworker.Some(float32(*p.v))
	}
	if b.Seed != nil {
		if *b.Seed < math.MinInt32 || *b.Seed > math.MaxInt32 {
			return badf("seed", "seed is %d; it must fit in 32 bits", *b.Seed)
		}
		s.Seed = grpcworker.Some(int32(*b.Seed))
	}
	return nil
}

// maxStops bounds the stop strings, as OpenAI's API does (4) with room for SGLang's clients.
const maxStops = 64

func (r *Request) stop(raw json.RawMessage) error {
	if len(raw) == 0 || isNull(raw) {
		return nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one != "" {
			r.Sampling.Stop = append(r.Sampling.Stop, one)
		}
		return nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return badf("stop", "stop must be a string or a list of strings")
	}
	if len(many) > maxStops {
		return badf("stop", "stop has %d strings; at most %d are taken", len(many), maxStops)
	}
	for _, s := range many {
		if s != "" {
			r.Sampling.Stop = append(r.Sampling.Stop, s)
		}
	}
	return nil
}

// constraint reads response_format (json_schema, json_object) and SGLang's regex, json_schema
// and ebnf fields: at most one constraint, as SGLang allows.
func (r *Request) constraint(b *body) error {
	s := &r.Sampling
	set := func(k grpcworker.ConstraintKind, v, param string) error {
		if s.Constraint != grpcworker.NoConstraint {
			return badf(param, "only one of response_format, regex, json_schema and ebnf may be given")
		}
		s.Constraint, s.ConstraintValue = k, v
		return nil
	}
	if f := b.ResponseFormat; f != nil {
		switch f.Type {
		case "text", "":
		case "json_object":
			if err := set(grpcworker.JSONObject, "", "response_format"); err != nil {
				return err
			}
		case "json_schema":
			if f.JSONSchema == nil || len(f.JSONSchema.Schema) == 0 || isNull(f.JSONSchema.Schema) {
				return badf("response_format", "response_format json_schema needs json_schema.schema, the JSON schema the output must follow")
			}
			if err := set(grpcworker.JSONSchema, string(f.JSONSchema.Schema), "response_format"); err != nil {
				return err
			}
		default:
			return badf("response_format", "response_format type %q is not served by gRPC workers; use text, json_object or json_schema", f.Type)
		}
	}
	if b.Regex != nil && *b.Regex != "" {
		if err := set(grpcworker.Regex, *b.Regex, "regex"); err != nil {
			return err
		}
	}
	if len(b.JSONSchema) > 0 && !isNull(b.JSONSchema) {
		// SGLang's json_schema is a string holding the schema; an object is taken as is.
		v := string(b.JSONSchema)
		var str string
		if json.Unmarshal(b.JSONSchema, &str) == nil {
			v = str
		}
		if err := set(grpcworker.JSONSchema, v, "json_schema"); err != nil {
			return err
		}
	}
	if b.EBNF != nil && *b.EBNF != "" {
		if err := set(grpcworker.Grammar, *b.EBNF, "ebnf"); err != nil {
			return err
		}
	}
	return nil
}

// prompt reads the completions prompt: a string, token ids, or a list of one of either
// (a batch of several prompts is refused: the gateway runs one engine request per request).
func (r *Request) prompt(raw json.RawMessage) error {
	if len(raw) == 0 || isNull(raw) {
		return badf("prompt", "prompt is required: a string or a list of token ids")
	}
	if json.Unmarshal(raw, &r.Text) == nil {
		r.TextSet = true
		return nil
	}
	if err := r.ids(raw, "prompt"); err == nil {
		return nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil && len(list) == 1 {
		return r.prompt(list[0])
	}
	if len(list) > 1 {
		return badf("prompt", "prompt has %d prompts; gRPC workers take one prompt per request", len(list))
	}
	return badf("prompt", "prompt must be a string or a list of token ids")
}

func (r *Request) generateInput(b *body) error {
	hasText := len(b.Text) > 0 && !isNull(b.Text)
	hasIDs := len(b.InputIDs) > 0 && !isNull(b.InputIDs)
	switch {
	case hasText && hasIDs:
		return badf("text", "give either text or input_ids, not both")
	case hasText:
		if json.Unmarshal(b.Text, &r.Text) != nil {
			return badf("text", "text must be a string (one prompt; batches are not served by gRPC workers)")
		}
		r.TextSet = true
		return nil
	case hasIDs:
		return r.ids(b.InputIDs, "input_ids")
	}
	return badf("text", "either text or input_ids is required")
}

func (r *Request) ids(raw json.RawMessage, param string) error {
	var ids []int64
	if err := json.Unmarshal(raw, &ids); err != nil {
		return badf(param, "%s must be a list of token ids (one prompt; batches are not served by gRPC workers)", param)
	}
	if len(ids) == 0 {
		return badf(param, "%s is empty", param)
	}
	for _, id := range ids {
		if id < 0 || id > math.MaxUint32 {
			return badf(param, "%s has %s, which is not a token id", param, strconv.FormatInt(id, 10))
		}
		r.InputIDs = append(r.InputIDs, uint32(id))
	}
	return nil
}

// StopOptions returns the detokenizer's options for r's choices, with the model's EOS ids.
func (r *Request) StopOptions(eos []uint32) stream.Options {
	return stream.Options{
		Stop:              r.Sampling.Stop,
		StopTokenIDs:      r.Sampling.StopTokenIDs,
		EOSTokenIDs:       eos,
		IgnoreEOS:         r.Sampling.IgnoreEOS,
		NoStopTrim:        r.NoStopTrim,
		KeepSpecialTokens: !r.SkipSpecialTokens,
	}
}

// Fill writes the engine request for r with the request id, the prompt ids and the worker's
// data-parallel rank (negative: none) into g.
func (r *Request) Fill(g *grpcworker.GenerateRequest, rid string, ids []uint32, dpRank int) {
	*g = grpcworker.GenerateRequest{
		RequestID: rid,
		InputIDs:  ids,
		Sampling:  r.Sampling,
		// Always streamed: the gateway detokenizes as tokens come, so a stop string ends the
		// engine's work as soon as it is seen, even for an unstreamed answer.
		Stream: true,
	}
	if dpRank >= 0 {
		g.DataParallelRank = grpcworker.Some(int32(dpRank))
	}
}
