package disagg

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
)

// pair is one top-level member as encoding/json reads it: the decoded name and the raw
// value, compacted.
type pair struct {
	name  string
	value string
}

// topMembers walks the top-level members of b with a json.Decoder, in order and with
// duplicates, which decoding into a map would hide. ok is false unless b is one valid JSON
// object.
func topMembers(b []byte) (ms []pair, ok bool) {
	if !json.Valid(b) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		var c bytes.Buffer
		if err := json.Compact(&c, raw); err != nil {
			return nil, false
		}
		ms = append(ms, pair{tok.(string), c.String()})
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return ms, true
}

// isObjectRef is the reference for acceptance: valid JSON whose first non-space byte is '{'.
func isObjectRef(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return json.Valid(b) && len(t) > 0 && t[0] == '{'
}

// sameJSON reports whether two raw JSON values decode to the same value.
func sameJSON(a, b []byte) bool {
	var x, y any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&x) != nil || db.Decode(&y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// checkRewrite is the contract of every rewrite: out (appended after prefix) is the input's
// members, in order and byte for byte, minus those named in set, then set's members with
// a Value, each once; or, when body is not one valid JSON object, ErrInvalidBody with dst
// unchanged. Set values are compared after decoding, so a test may give them in any
// equivalent spelling.
func checkRewrite(t *testing.T, prefix, body, out []byte, err error, set []Member) {
	t.Helper()
	in, valid := topMembers(body)
	if valid != isObjectRef(body) {
		// topMembers is stricter than json.Valid only for non-objects.
		valid = false
	}
	if !valid {
		if err == nil {
			t.Fatalf("accepted invalid body %q, wrote %q", body, out)
		}
		if !errors.Is(err, ErrInvalidBody) {
			t.Fatalf("error %v for %q, want ErrInvalidBody", err, body)
		}
		if string(out) != string(prefix) {
			t.Fatalf("dst changed on error: %q, want %q", out, prefix)
		}
		return
	}
	if err != nil {
		t.Fatalf("rejected valid body %q: %v", body, err)
	}
	if !bytes.HasPrefix(out, prefix) {
		t.Fatalf("dst prefix overwritten: %q", out)
	}
	got, ok := topMembers(out[len(prefix):])
	if !ok {
		t.Fatalf("invalid output %q for body %q", out[len(prefix):], body)
	}
	var want []pair
	for _, m := range in {
		if !setNames(set, m.name) {
			want = append(want, m)
		}
	}
	nKept := len(want)
	for _, m := range set {
		if m.Value != nil {
			want = append(want, pair{m.Name, string(m.Value)})
		}
	}
	if len(got) != len(want) {
		t.Fatalf("output %q has %d members, want %d (%v)", out[len(prefix):], len(got), len(want), want)
	}
	for i := range got {
		if got[i].name != want[i].name {
			t.Fatalf("member %d of %q is %q, want %q", i, out[len(prefix):], got[i].name, want[i].name)
		}
		if i < nKept && got[i].value != want[i].value || i >= nKept && !sameJSON([]byte(got[i].value), []byte(want[i].value)) {
			t.Fatalf("member %q of %q is %s, want %s", got[i].name, out[len(prefix):], got[i].value, want[i].value)
		}
	}
}

func setNames(set []Member, name string) bool {
	for _, m := range set {
		if m.Name == name {
			return true
		}
	}
	return false
}

// bootstrapSet is what AppendBootstrap should set, for checkRewrite.
func bootstrapSet(host string, port int, room uint64) []Member {
	if len(host) >= 2 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	h, _ := json.Marshal(host) // replaces invalid UTF-8 as AppendBootstrap does
	p := []byte("null")
	if port > 0 {
		p, _ = json.Marshal(port)
	}
	r, _ := json.Marshal(room)
	return []Member{{nameBootstrapHost, h}, {nameBootstrapPort, p}, {nameBootstrapRoom, r}}
}

func decodeSet(params []byte) []Member {
	return []Member{{nameKVTransferParams, params}}
}
