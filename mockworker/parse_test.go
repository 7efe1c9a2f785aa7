package mockworker

import (
	"reflect"
	"strings"
	"testing"

	"github.com/valyala/fastjson"

	"github.com/smg-go/smg/internal/http1"
)

func TestParseGenRequest(t *testing.T) {
	tests := []struct {
		name   string
		kind   genKind
		body   string
		want   genRequest
		errHas string
	}{
		{name: "chat defaults", kind: kindChat,
			body: `{"model":"m","messages":[{"role":"user","content":"12345678"}]}`,
			want: genRequest{promptTokens: 2, prompt: []byte("12345678")}},
		{name: "chat parts, max_completion_tokens wins", kind: kindChat,
			body: `{"messages":[{"role":"system","content":"ab"},{"role":"user","content":[{"type":"text","text":"cde"},{"type":"image_url","image_url":{"url":"x"}}]}],"max_tokens":3,"max_completion_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`,
			want: genRequest{stream: true, includeUsage: true, maxTokens: 5, promptTokens: 2, prompt: []byte("abcde")}},
		{name: "chat max_tokens", kind: kindChat,
			body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":7,"max_completion_tokens":null}`,
			want: genRequest{maxTokens: 7, promptTokens: 1, prompt: []byte("x")}},
		{name: "chat without messages", kind: kindChat, body: `{"model":"m"}`, errHas: "messages"},
		{name: "chat empty messages", kind: kindChat, body: `{"messages":[]}`, errHas: "messages"},
		{name: "not JSON", kind: kindChat, body: `{"messages":`, errHas: "not valid JSON"},
		{name: "not an object", kind: kindChat, body: `[1]`, errHas: "JSON object"},
		{name: "stream not bool", kind: kindChat, body: `{"messages":[{"content":"x"}],"stream":"yes"}`, errHas: "stream"},
		{name: "max_tokens zero", kind: kindChat, body: `{"messages":[{"content":"x"}],"max_tokens":0}`, errHas: "max_tokens"},
		{name: "max_tokens huge", kind: kindCompletion, body: `{"prompt":"x","max_tokens":99999999}`, errHas: "at most"},
		{name: "max_tokens fractional", kind: kindCompletion, body: `{"prompt":"x","max_tokens":1.5}`, errHas: "max_tokens"},
		{name: "completion string", kind: kindCompletion, body: `{"prompt":"hello world","max_tokens":2}`,
			want: genRequest{maxTokens: 2, promptTokens: 3, prompt: []byte("hello world")}},
		{name: "completion token ids", kind: kindCompletion, body: `{"prompt":[1,2,3,4,5]}`,
			want: genRequest{promptTokens: 5, inputIDs: 5, prompt: []byte{}}},
		{name: "completion batch of strings", kind: kindCompletion, body: `{"prompt":["ab","cd"]}`,
			want: genRequest{promptTokens: 1, prompt: []byte("abcd")}},
		{name: "completion without prompt", kind: kindCompletion, body: `{"max_tokens":2}`, errHas: "prompt"},
		{name: "generate text", kind: kindGenerate,
			body: `{"text":"hello","sampling_params":{"max_new_tokens":4},"stream":true,"rid":"r-1"}`,
			want: genRequest{stream: true, maxTokens: 4, promptTokens: 2, prompt: []byte("hello"), rid: "r-1"}},
		{name: "generate input_ids", kind: kindGenerate, body: `{"input_ids":[[1,2],[3]]}`,
			want: genRequest{promptTokens: 3, inputIDs: 3, prompt: []byte{}}},
		{name: "generate neither", kind: kindGenerate, body: `{"sampling_params":{}}`, errHas: "input_ids"},
		{name: "generate bad max_new_tokens", kind: kindGenerate, body: `{"text":"x","sampling_params":{"max_new_tokens":-1}}`, errHas: "max_new_tokens"},
		// Duplicate keys: the last wins at every level, as Python's json module reads them.
		{name: "duplicates: last stream, messages, content, max_tokens", kind: kindChat,
			body: `{"stream":false,"messages":[{"content":"first"}],"max_tokens":1,"stream":true,"messages":[{"content":"no","content":"last"}],"max_tokens":3,"stream_options":{"include_usage":false,"include_usage":true}}`,
			want: genRequest{stream: true, includeUsage: true, maxTokens: 3, promptTokens: 1, prompt: []byte("last")}},
		{name: "duplicates: last prompt", kind: kindCompletion, body: `{"prompt":"aaaaaaaaaaaa","prompt":"b"}`,
			want: genRequest{promptTokens: 1, prompt: []byte("b")}},
		{name: "duplicates: last text, rid and max_new_tokens", kind: kindGenerate,
			body: `{"text":"x","rid":"r-1","sampling_params":{"max_new_tokens":9,"max_new_tokens":2},"text":"yz","rid":"r-2"}`,
			want: genRequest{maxTokens: 2, promptTokens: 1, prompt: []byte("yz"), rid: "r-2"}},
		{name: "duplicates: a later mistyped stream fails", kind: kindChat, body: `{"messages":[{"content":"x"}],"stream":true,"stream":"yes"}`, errHas: "stream"},
		{name: "utf8 counts bytes", kind: kindGenerate, body: `{"text":"héllo"}`,
			want: genRequest{promptTokens: 2, prompt: []byte("héllo")}},
	}
	var p fastjson.Parser
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseGenRequest(&p, tt.kind, []byte(tt.body), nil, nil)
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("err = %v, want one mentioning %q", err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.want.kind = tt.kind
			if string(got.prompt) != string(tt.want.prompt) {
				t.Errorf("prompt = %q, want %q", got.prompt, tt.want.prompt)
			}
			if len(got.ids) != got.inputIDs {
				t.Errorf("%d ids kept, %d counted", len(got.ids), got.inputIDs)
			}
			got.prompt, tt.want.prompt, got.ids = nil, nil, nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseFault(t *testing.T) {
	tests := []struct {
		in     string
		want   fault
		errHas string
	}{
		{in: "", want: fault{}},
		{in: "hang", want: fault{hang: true}},
		{in: "status=503", want: fault{status: 503}},
		{in: " status = 429 , hang ", want: fault{status: 429, hang: true}},
		{in: "body-sha256", want: fault{bodySHA256: true}},
		{in: "status=200", errHas: "400..599"},
		{in: "status=abc", errHas: "400..599"},
		{in: "explode", errHas: "unknown item"},
		{in: "hang=1", errHas: "unknown item"},
	}
	for _, tt := range tests {
		got, err := parseFault([]byte(tt.in))
		if tt.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("parseFault(%q) err = %v, want %q", tt.in, err, tt.errHas)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseFault(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseAdminConfig(t *testing.T) {
	var p fastjson.Parser
	cur := AdminConfig{Status: 503}
	got, err := parseAdminConfig(&p, []byte(`{"delay_ms":25,"healthy":false}`), cur)
	if err != nil {
		t.Fatal(err)
	}
	if want := (AdminConfig{Status: 503, Delay: 25e6, Unhealthy: true}); got != want {
		t.Fatalf("got %+v, want %+v (absent keys must keep their value)", got, want)
	}
	round, err := parseAdminConfig(&p, appendAdminConfig(nil, got), AdminConfig{})
	if err != nil || round != got {
		t.Fatalf("round trip = %+v, %v; want %+v", round, err, got)
	}
	for body, errHas := range map[string]string{
		`{"status":200}`:       "400..599",
		`{"status":"x"}`:       "integer",
		`{"delay_ms":-1}`:      "delay_ms",
		`{"healthy":1}`:        "healthy",
		`{"colour":"red"}`:     "unknown admin config key",
		`[]`:                   "JSON object",
		`{`:                    "not valid JSON",
		`{"status":503,"x":1}`: "unknown",
	} {
		if _, err := parseAdminConfig(&p, []byte(body), AdminConfig{}); err == nil || !strings.Contains(err.Error(), errHas) {
			t.Errorf("parseAdminConfig(%s) err = %v, want %q", body, err, errHas)
		}
	}
}

func TestParseHTTPRequest(t *testing.T) {
	var scratch []byte
	var req httpRequest

	full := "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nX-Request-Id: r1\r\nX-Mock-Fault: hang\r\n\r\nhello"
	for cut := 0; cut < len(full); cut++ {
		if n, err := parseHTTPRequest([]byte(full[:cut]), &req, &scratch); n != 0 || err != nil {
			t.Fatalf("prefix of %d bytes: n=%d err=%v, want incomplete", cut, n, err)
		}
	}
	n, err := parseHTTPRequest([]byte(full+"GET /health HTTP/1.1\r\n\r\n"), &req, &scratch)
	if err != nil || n != len(full) {
		t.Fatalf("n=%d err=%v, want %d", n, err, len(full))
	}
	if string(req.method) != "POST" || string(req.path) != "/v1/completions" || string(req.body) != "hello" ||
		string(req.requestID) != "r1" || string(req.fault) != "hang" || !req.keepAlive {
		t.Fatalf("parsed %+v", req)
	}

	chunked := "POST /generate HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\n{\"t\r\n7\r\next\":1}\r\n0\r\nTrailer: x\r\n\r\n"
	n, err = parseHTTPRequest([]byte(chunked), &req, &scratch)
	if err != nil || n != len(chunked) || string(req.body) != `{"text":1}` {
		t.Fatalf("chunked: n=%d err=%v body=%q", n, err, req.body)
	}
	if n, _ := parseHTTPRequest([]byte(chunked[:len(chunked)-2]), &req, &scratch); n != 0 {
		t.Fatalf("chunked without the final CRLF: n=%d, want incomplete", n)
	}

	n, err = parseHTTPRequest([]byte("POST /x HTTP/1.1\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n"), &req, &scratch)
	if n != 0 || err != nil || !req.expectContinue {
		t.Fatalf("expect: n=%d err=%v expectContinue=%v", n, err, req.expectContinue)
	}

	n, err = parseHTTPRequest([]byte("GET http://h:1/health HTTP/1.0\r\n\r\n"), &req, &scratch)
	if err != nil || n == 0 || string(req.path) != "/health" || req.keepAlive {
		t.Fatalf("absolute form, HTTP/1.0: n=%d err=%v %+v", n, err, req)
	}
	n, err = parseHTTPRequest([]byte("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"), &req, &scratch)
	if err != nil || n == 0 || !req.keepAlive {
		t.Fatalf("HTTP/1.0 keep-alive: %+v %v", req, err)
	}
	n, err = parseHTTPRequest([]byte("GET / HTTP/1.1\r\nConnection: close\r\n\r\n"), &req, &scratch)
	if err != nil || n == 0 || req.keepAlive {
		t.Fatalf("Connection: close: %+v %v", req, err)
	}

	for in, status := range map[string]int{
		"GET /\r\n\r\n":                                                            400,
		"GET / HTTP/2.0\r\n\r\n":                                                   400,
		"GET / HTTP/1.1\r\nno colon\r\n\r\n":                                       400,
		"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n":                             400,
		"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n":        400,
		"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n":                       501,
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n":              400,
		"POST / HTTP/1.1\r\nContent-Length: 999999999\r\n\r\n":                     413,
		"GET / HTTP/1.1\r\nA: " + strings.Repeat("a", maxHeaderBytes) + "\r\n\r\n": 431,
	} {
		_, err := parseHTTPRequest([]byte(in), &req, &scratch)
		pe, ok := err.(*http1.Error)
		if !ok || pe.Status != status {
			t.Errorf("%.40q: err = %v, want status %d", in, err, status)
		}
	}
}
