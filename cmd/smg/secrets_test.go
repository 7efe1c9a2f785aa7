package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestRedactArgsHidesSecretFlagValues(t *testing.T) {
	in := []string{"smg", "launch", "--api-key", "sk-1", "--port", "1", "--api-key=sk-2", "-api-key", "sk-3", "--api-key-file", "/k"}
	want := []string{"smg", "launch", "--api-key", "REDACTED", "--port", "1", "--api-key=REDACTED", "-api-key", "REDACTED", "--api-key-file", "/k"}
	if got := redactArgs(in); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if in[3] != "sk-1" {
		t.Fatal("redactArgs changed its input")
	}
}

func TestResolveAPIKey(t *testing.T) {
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte("sk-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == envAPIKey {
				return v
			}
			return ""
		}
	}
	for _, c := range []struct {
		name               string
		flagSet, fileSet   bool
		flagValue, envVal  string
		want, wantErrWords string
	}{
		{name: "flag wins over env", flagSet: true, flagValue: "sk-flag", envVal: "sk-env", want: "sk-flag"},
		{name: "file", fileSet: true, envVal: "sk-env", want: "sk-file"},
		{name: "env", envVal: "sk-env", want: "sk-env"},
		{name: "none", want: ""},
		{name: "both flags", flagSet: true, fileSet: true, wantErrWords: "both given"},
	} {
		o := options{apiKeyFile: file}
		o.gateway.APIKey = c.flagValue
		err := o.resolveAPIKey(c.flagSet, c.fileSet, env(c.envVal))
		if c.wantErrWords != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErrWords) {
				t.Errorf("%s: error %v", c.name, err)
			}
			continue
		}
		if err != nil || o.gateway.APIKey != c.want {
			t.Errorf("%s: key %q, error %v; want %q", c.name, o.gateway.APIKey, err, c.want)
		}
	}
	o := options{apiKeyFile: filepath.Join(t.TempDir(), "missing")}
	if err := o.resolveAPIKey(false, true, env("")); err == nil || !strings.Contains(err.Error(), "--api-key-file") {
		t.Errorf("missing file: %v", err)
	}
}
