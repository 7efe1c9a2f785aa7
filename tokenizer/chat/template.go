package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// Phase says where a TemplateError arose.
type Phase string

const (
	// PhaseCompile: the template source does not parse.
	PhaseCompile Phase = "compile"
	// PhaseInput: the request cannot be turned into template variables
	// (malformed JSON, messages missing, tool-call arguments not JSON).
	PhaseInput Phase = "input"
	// PhaseRender: rendering failed, including the template calling
	// raise_exception.
	PhaseRender Phase = "render"
)

// TemplateError is the error Compile, DecodeRequest and Render return. Every
// such error is the client's or the template's fault, never the gateway's:
// the gateway answers it with HTTP 400 and Error() as the message.
type TemplateError struct {
	Phase Phase
	// Raised is set when the template itself rejected the request through
	// raise_exception; Msg is then the template's message verbatim.
	Raised bool
	Msg    string
	Err    error // underlying cause, if any
}

func (e *TemplateError) Error() string {
	switch {
	case e.Raised:
		return "chat template rejected the request: " + e.Msg
	case e.Phase == PhaseInput:
		return "invalid chat request: " + e.Msg
	case e.Phase == PhaseCompile:
		return "chat template does not compile: " + e.Msg
	}
	return "chat template failed to render: " + e.Msg
}

func (e *TemplateError) Unwrap() error { return e.Err }

func newError(p Phase, err error) *TemplateError {
	var te *TemplateError
	if errors.As(err, &te) {
		return te
	}
	var re *raisedError
	if errors.As(err, &re) {
		return &TemplateError{Phase: PhaseRender, Raised: true, Msg: re.msg, Err: err}
	}
	return &TemplateError{Phase: p, Msg: err.Error(), Err: err}
}

func inputErrorf(format string, args ...any) *TemplateError {
	return &TemplateError{Phase: PhaseInput, Msg: fmt.Sprintf(format, args...)}
}

// raisedError is what raise_exception returns.
type raisedError struct{ msg string }

func (e *raisedError) Error() string { return e.msg }

// ContentFormat is how a template expects message content.
type ContentFormat int

const (
	// ContentString: content is a string; a list of parts is flattened to
	// its text parts joined with " ".
	ContentString ContentFormat = iota
	// ContentParts: the template iterates content parts itself; a list of
	// parts is passed through as it is.
	ContentParts
)

func (f ContentFormat) String() string {
	if f == ContentParts {
		return "openai"
	}
	return "string"
}

// Option configures Compile.
type Option func(*Template)

// WithSpecialTokens sets the special-token variables (bos_token, eos_token,
// unk_token, pad_token, ...) that transformers passes from the tokenizer's
// special_tokens_map. Request kwargs override them.
func WithSpecialTokens(tokens map[string]string) Option {
	return func(t *Template) {
		for k, v := range tokens {
			t.specials[k] = jinja.NewString(v)
		}
	}
}

// WithClock sets the clock strftime_now reads (time.Now by default).
func WithClock(now func() time.Time) Option {
	return func(t *Template) { t.now = now }
}

// WithContentFormat overrides the content format detected from the source.
func WithContentFormat(f ContentFormat) Option {
	return func(t *Template) { t.format = f }
}

// WithToolArguments overrides whether tool-call arguments given as JSON
// strings are parsed into objects before rendering (detected from the
// source otherwise).
func WithToolArguments(parse bool) Option {
	return func(t *Template) { t.parseArgs = parse }
}

// Template is a compiled chat template. It is immutable after Compile and
// safe for concurrent use.
type Template struct {
	tmpl      *jinja.Template
	specials  map[string]jinja.Value
	globals   map[string]jinja.Value // functions this package supplies
	now       func() time.Time
	format    ContentFormat
	parseArgs bool
}

// Compile parses a Hugging Face chat template once. Errors are
// *TemplateError with PhaseCompile.
func Compile(source string, opts ...Option) (t *Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, &TemplateError{Phase: PhaseCompile, Msg: fmt.Sprint("engine panic: ", r)}
		}
	}()
	jt, err := jinja.Compile(rewriteSource(source))
	if err != nil {
		return nil, newError(PhaseCompile, err)
	}
	t = &Template{
		tmpl:      jt,
		specials:  map[string]jinja.Value{},
		now:       time.Now,
		format:    detectContentFormat(source),
		parseArgs: detectObjectArguments(source),
	}
	for _, o := range opts {
		o(t)
	}
	t.globals = map[string]jinja.Value{
		printFilter:       jinja.NewCallable(printFilter, filterPrint),
		tojsonFilter:      jinja.NewCallable("tojson", filterTojson),
		joinFilter:        jinja.NewCallable("join", filterJoin),
		"raise_exception": jinja.NewCallable("raise_exception", raiseException),
		"strftime_now":    jinja.NewCallable("strftime_now", t.strftimeNow),
	}
	return t, nil
}

// ContentFormat reports how the template expects message content.
func (t *Template) ContentFormat() ContentFormat { return t.format }

// ParsesToolArguments reports whether string tool-call arguments are parsed
// into objects before rendering.
func (t *Template) ParsesToolArguments() bool { return t.parseArgs }

// Render appends the prompt for req to dst. The request is not modified;
// errors are *TemplateError.
func (t *Template) Render(dst []byte, req *Request) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = dst, &TemplateError{Phase: PhaseRender, Msg: fmt.Sprint("engine panic: ", r)}
		}
	}()
	if req == nil || !req.Messages.IsList() {
		return dst, inputErrorf("messages must be a list")
	}
	msgs, terr := t.prepareMessages(req.Messages.AsList().Items)
	if terr != nil {
		return dst, terr
	}
	data := make(map[string]jinja.Value, 8+len(t.specials)+len(t.globals))
	maps.Copy(data, t.globals)
	data["messages"] = jinja.NewList(msgs)
	data["tools"] = orNone(req.Tools)
	data["documents"] = orNone(req.Documents)
	data["add_generation_prompt"] = jinja.NewBool(req.AddGenerationPrompt)
	maps.Copy(data, t.specials)
	if !req.ReasoningEffort.IsUndefined() {
		data["reasoning_effort"] = req.ReasoningEffort
	}
	if !req.ToolChoice.IsUndefined() {
		data["tool_choice"] = req.ToolChoice
	}
	if req.Kwargs.IsDict() {
		d := req.Kwargs.AsDict()
		for _, k := range d.Keys {
			data[k] = d.Data[k]
		}
	}
	s, rerr := t.tmpl.RenderValues(data)
	if rerr != nil {
		return dst, newError(PhaseRender, rerr)
	}
	return append(dst, s...), nil
}

func orNone(v jinja.Value) jinja.Value {
	if v.IsUndefined() {
		return jinja.None()
	}
	return v
}

// prepareMessages applies the content-format and tool-argument rules. Dicts
// that change are copied; the rest are shared with the request.
func (t *Template) prepareMessages(in []jinja.Value) ([]jinja.Value, *TemplateError) {
	out := make([]jinja.Value, len(in))
	for i, m := range in {
		if !m.IsDict() {
			return nil, inputErrorf("messages[%d] is not an object", i)
		}
		md := m.AsDict()
		var copied *jinja.Dict
		set := func(k string, v jinja.Value) {
			if copied == nil {
				nv := jinja.NewDict()
				copied = nv.AsDict()
				for _, key := range md.Keys {
					copied.Set(key, md.Data[key])
				}
				m = nv
			}
			copied.Set(k, v)
		}
		if c, ok := md.Get("content"); ok && c.IsList() && t.format == ContentString {
			set("content", jinja.NewString(joinTextParts(c.AsList().Items)))
		}
		if t.parseArgs {
			if calls, ok := md.Get("tool_calls"); ok && calls.IsList() && roleIs(md, "assistant") {
				parsed, changed, err := parseToolArguments(calls.AsList().Items)
				if err != nil {
					return nil, inputErrorf("messages[%d]: %s", i, err)
				}
				if changed {
					set("tool_calls", parsed)
				}
			}
		}
		out[i] = m
	}
	return out, nil
}

func roleIs(d *jinja.Dict, role string) bool {
	r, ok := d.Get("role")
	return ok && r.IsString() && r.AsString() == role
}

// joinTextParts flattens OpenAI content parts to their text parts joined
// with " " (parts of other types are dropped).
func joinTextParts(parts []jinja.Value) string {
	var b strings.Builder
	n := 0
	for _, p := range parts {
		if !p.IsDict() {
			continue
		}
		pd := p.AsDict()
		typ, _ := pd.Get("type")
		text, _ := pd.Get("text")
		if !typ.IsString() || typ.AsString() != "text" || !text.IsString() {
			continue
		}
		if n > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(text.AsString())
		n++
	}
	return b.String()
}

// parseToolArguments returns calls with every function.arguments that is a
// string replaced by the JSON value it holds.
func parseToolArguments(calls []jinja.Value) (jinja.Value, bool, error) {
	var out []jinja.Value
	for i, call := range calls {
		if !call.IsDict() {
			continue
		}
		fn, ok := call.AsDict().Get("function")
		if !ok || !fn.IsDict() {
			continue
		}
		args, ok := fn.AsDict().Get("arguments")
		if !ok || !args.IsString() {
			continue
		}
		v, err := DecodeJSON([]byte(args.AsString()))
		if err != nil {
			return jinja.Undefined(), false, fmt.Errorf("tool_calls[%d].function.arguments is not valid JSON: %v", i, err)
		}
		if out == nil {
			out = append([]jinja.Value(nil), calls...)
		}
		out[i] = withKey(call, "function", withKey(fn, "arguments", v))
	}
	if out == nil {
		return jinja.Undefined(), false, nil
	}
	return jinja.NewList(out), true, nil
}

// withKey returns a copy of dict d with key set to v.
func withKey(d jinja.Value, key string, v jinja.Value) jinja.Value {
	nv := jinja.NewDict()
	nd := nv.AsDict()
	src := d.AsDict()
	for _, k := range src.Keys {
		nd.Set(k, src.Data[k])
	}
	nd.Set(key, v)
	return nv
}

var (
	// A template iterates, indexes or measures message content: it handles
	// lists of parts itself.
	partsPattern = regexp.MustCompile(`for\s+\w+\s+in\s+(?:\w+\s*(?:\.\s*content|\[\s*['"]content['"]\s*\])|content)\b|(?:\.content|\[\s*['"]content['"]\s*\]|\bcontent)\s*(?:\[\s*\d|\|\s*length)`)
	// A template consumes tool-call arguments as an object.
	objectArgsPattern = regexp.MustCompile(`arguments['"]?\s*\]?\s*(?:\|\s*(?:tojson|items|dictsort)\b|is\s+(?:not\s+)?(?:string|mapping)\b|\.\s*items\s*\()`)
)

// detectContentFormat decides from the source whether the template handles
// content given as a list of parts (it loops over, indexes or measures
// message content); otherwise it wants strings.
func detectContentFormat(src string) ContentFormat {
	if partsPattern.MatchString(src) {
		return ContentParts
	}
	return ContentString
}

// detectObjectArguments decides from the source whether the template reads
// tool-call arguments as an object (tojson, items, a string/mapping test).
// Such templates get arguments parsed from their JSON string, as SMG, SGLang
// and vLLM do; templates that only splice arguments into text (DeepSeek V3)
// get the string, since jinja2 cannot concatenate a dict to a string.
func detectObjectArguments(src string) bool {
	return objectArgsPattern.MatchString(src)
}

// ---- functions supplied to templates ----

func filterPrint(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.NewString(""), nil
	}
	if v := args[0]; v.IsString() {
		return v, nil
	}
	return jinja.NewString(string(appendPyStr(nil, args[0]))), nil
}

// filterTojson is transformers' tojson: json.dumps(x, ensure_ascii=False,
// indent=None, separators=None, sort_keys=False), object key order kept.
func filterTojson(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), errors.New("tojson: missing value")
	}
	pos := args[1:] // positional: ensure_ascii, indent, separators, sort_keys
	arg := func(i int, name string) jinja.Value {
		if v, ok := kwargs[name]; ok {
			return v
		}
		if i < len(pos) {
			return pos[i]
		}
		return jinja.Undefined()
	}
	o := jsonOptions{itemSep: ", ", keySep: ": "}
	o.ensureASCII = arg(0, "ensure_ascii").IsTruthy()
	if ind := arg(1, "indent"); !ind.IsUndefined() && !ind.IsNone() {
		o.hasIndent = true
		o.itemSep = ","
		switch {
		case ind.IsString():
			o.indent = ind.AsString()
		case ind.IsInt() || ind.IsBool():
			n := int64(0)
			if ind.IsInt() {
				n = ind.AsInt()
			} else if ind.AsBool() {
				n = 1
			}
			if n > 64 {
				return jinja.Undefined(), errors.New("tojson: indent too large")
			}
			o.indent = strings.Repeat(" ", int(max(n, 0)))
		default:
			return jinja.Undefined(), errors.New("tojson: indent must be an int or a string")
		}
	}
	if sep := arg(2, "separators"); !sep.IsUndefined() && !sep.IsNone() {
		if !sep.IsList() || len(sep.AsList().Items) != 2 || !sep.AsList().Items[0].IsString() || !sep.AsList().Items[1].IsString() {
			return jinja.Undefined(), errors.New("tojson: separators must be a pair of strings")
		}
		o.itemSep = sep.AsList().Items[0].AsString()
		o.keySep = sep.AsList().Items[1].AsString()
	}
	o.sortKeys = arg(3, "sort_keys").IsTruthy()
	b, err := appendJSON(nil, args[0], &o, 0)
	if err != nil {
		return jinja.Undefined(), fmt.Errorf("tojson: %w", err)
	}
	return jinja.NewString(string(b)), nil
}

// filterJoin is jinja2's join(value, d=”, attribute=None): the items (a
// dict's keys, a string's characters) converted with Python's str() and
// joined with d.
func filterJoin(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), errors.New("join: missing value")
	}
	sep := ""
	if d, ok := kwargs["d"]; ok {
		sep = string(appendPyStr(nil, d))
	} else if len(args) > 1 {
		sep = string(appendPyStr(nil, args[1]))
	}
	var items []jinja.Value
	switch v := args[0]; {
	case v.IsList():
		items = v.AsList().Items
	case v.IsDict():
		for _, k := range v.AsDict().Keys {
			items = append(items, jinja.NewString(k))
		}
	case v.IsString():
		for _, r := range v.AsString() {
			items = append(items, jinja.NewString(string(r)))
		}
	case v.IsUndefined():
	default:
		return jinja.Undefined(), errors.New("join: value is not iterable")
	}
	attr, hasAttr := kwargs["attribute"]
	var b []byte
	for i, item := range items {
		if i > 0 {
			b = append(b, sep...)
		}
		if hasAttr {
			item = getAttribute(item, string(appendPyStr(nil, attr)))
		}
		b = appendPyStr(b, item)
	}
	return jinja.NewString(string(b)), nil
}

// getAttribute follows a dotted attribute path (dict keys, list indices) as
// jinja2's attribute= arguments do; a missing step is undefined.
func getAttribute(v jinja.Value, path string) jinja.Value {
	for part := range strings.SplitSeq(path, ".") {
		switch {
		case v.IsDict():
			x, ok := v.AsDict().Get(part)
			if !ok {
				return jinja.Undefined()
			}
			v = x
		case v.IsList():
			n, err := strconv.Atoi(part)
			items := v.AsList().Items
			if err != nil || n < 0 || n >= len(items) {
				return jinja.Undefined()
			}
			v = items[n]
		default:
			return jinja.Undefined()
		}
	}
	return v
}

func raiseException(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	msg := ""
	if len(args) > 0 {
		msg = string(appendPyStr(nil, args[0]))
	}
	return jinja.Undefined(), &raisedError{msg: msg}
}

func (t *Template) strftimeNow(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 || !args[0].IsString() {
		return jinja.Undefined(), errors.New("strftime_now: format must be a string")
	}
	return jinja.NewString(strftime(t.now(), args[0].AsString())), nil
}

// ---- tokenizer_config.json ----

// specialTokenKeys are the special tokens transformers passes to templates.
var specialTokenKeys = []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}

// FromTokenizerConfig compiles the chat_template of a Hugging Face
// tokenizer_config.json and binds its special tokens (given as strings or
// as {"content": ...} objects). A chat_template given as a list of named
// templates uses the one named "default". Later options override the
// special tokens found in the file.
func FromTokenizerConfig(config []byte, opts ...Option) (*Template, error) {
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(config, &cfg); err != nil {
		return nil, &TemplateError{Phase: PhaseCompile, Msg: "tokenizer config: " + err.Error(), Err: err}
	}
	source, err := configTemplate(cfg["chat_template"])
	if err != nil {
		return nil, err
	}
	tokens := map[string]string{}
	for _, k := range specialTokenKeys {
		raw, ok := cfg[k]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil && s != "" {
			tokens[k] = s
			continue
		}
		var obj struct {
			Content *string `json:"content"`
		}
		if json.Unmarshal(raw, &obj) == nil && obj.Content != nil {
			tokens[k] = *obj.Content
		}
	}
	return Compile(source, append([]Option{WithSpecialTokens(tokens)}, opts...)...)
}

func configTemplate(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", &TemplateError{Phase: PhaseCompile, Msg: "tokenizer config has no chat_template"}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", &TemplateError{Phase: PhaseCompile, Msg: "chat_template is neither a string nor a list of named templates", Err: err}
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	return "", &TemplateError{Phase: PhaseCompile, Msg: `chat_template list has no "default" entry`}
}
