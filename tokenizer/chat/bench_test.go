package chat

import (
	"testing"
)

// benchChat is a 10-message conversation with a tool definition, a tool call
// and its result.
const benchChat = `{"messages": [
 {"role": "system", "content": "You are a helpful assistant. Answer concisely and cite sources when you can."},
 {"role": "user", "content": "What's the weather like in Paris today?"},
 {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]},
 {"role": "tool", "tool_call_id": "call_1", "content": "{\"temperature\": 21, \"conditions\": \"sunny\"}"},
 {"role": "assistant", "content": "It is 21°C and sunny in Paris."},
 {"role": "user", "content": "Great. And what should I wear for a walk along the Seine this evening?"},
 {"role": "assistant", "content": "A light jacket should do: evenings by the river get cooler, around 15°C."},
 {"role": "user", "content": "Can you suggest three sights on the way from the Louvre to the Eiffel Tower?"},
 {"role": "assistant", "content": "1. Jardin des Tuileries\n2. Place de la Concorde\n3. Pont Alexandre III"},
 {"role": "user", "content": "Thanks! How long does that walk take?"}
],
"tools": [{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather for a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}]}`

// BenchmarkRenderQwen3 renders benchChat with Qwen3's template (decoded
// once; Render only).
func BenchmarkRenderQwen3(b *testing.B) {
	tmpl := loadTemplate(b, "qwen3")
	req, err := DecodeRequest([]byte(benchChat))
	if err != nil {
		b.Fatal(err)
	}
	buf, err := tmpl.Render(nil, req)
	if err != nil || len(buf) == 0 {
		b.Fatalf("render: %v", err)
	}
	b.ReportAllocs()
	for b.Loop() {
		buf, err = tmpl.Render(buf[:0], req)
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeAndRenderQwen3 includes decoding the request body.
func BenchmarkDecodeAndRenderQwen3(b *testing.B) {
	tmpl := loadTemplate(b, "qwen3")
	body := []byte(benchChat)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		req, err := DecodeRequest(body)
		if err != nil {
			b.Fatal(err)
		}
		if buf, err = tmpl.Render(buf[:0], req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeRequest decodes benchChat's body.
func BenchmarkDecodeRequest(b *testing.B) {
	body := []byte(benchChat)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}
