package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"
)

// Secrets on the command line are visible to anyone who can list processes, and
// /debug/pprof/cmdline shows them redacted (redactedCmdline). The gateway takes
// them from a file or the environment too, and never prints a command line with them.

// envAPIKey is read for --api-key when neither --api-key nor --api-key-file is given.
const envAPIKey = "SMG_API_KEY"

// secretFlags are the flags whose values are redacted wherever the command line is shown.
var secretFlags = []string{"api-key"}

// resolveAPIKey fills o.gateway.APIKey from --api-key-file or $SMG_API_KEY when --api-key is
// not given. Giving both flags is an error: which one wins would be a guess.
func (o *options) resolveAPIKey(flagSet, fileSet bool, getenv func(string) string) error {
	switch {
	case flagSet && fileSet:
		return fmt.Errorf("--api-key and --api-key-file both given: keep one (prefer --api-key-file, which process listings do not show)")
	case fileSet:
		b, err := os.ReadFile(o.apiKeyFile)
		if err != nil {
			return fmt.Errorf("cannot read --api-key-file: %w", err)
		}
		key := strings.TrimRight(string(b), "\r\n")
		if key == "" || strings.ContainsAny(key, "\r\n") {
			return fmt.Errorf("--api-key-file %s: must hold the key on one line", o.apiKeyFile)
		}
		o.gateway.APIKey = key
	case !flagSet:
		o.gateway.APIKey = getenv(envAPIKey)
	}
	return nil
}

// redactArgs returns args with the value of every secret flag replaced, in both the
// "--flag value" and the "--flag=value" forms.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	copy(out, args)
	for i := 0; i < len(out); i++ {
		name, _, hasValue := strings.Cut(strings.TrimLeft(out[i], "-"), "=")
		if !strings.HasPrefix(out[i], "-") || !isSecretFlag(name) {
			continue
		}
		if hasValue {
			out[i] = out[i][:strings.IndexByte(out[i], '=')+1] + "REDACTED"
		} else if i+1 < len(out) {
			i++
			out[i] = "REDACTED"
		}
	}
	return out
}

func isSecretFlag(name string) bool {
	for _, s := range secretFlags {
		if name == s {
			return true
		}
	}
	return false
}

// redactedCmdline serves /debug/pprof/cmdline as net/http/pprof does (arguments separated by
// NUL bytes), with the secrets redacted.
func redactedCmdline(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprint(w, strings.Join(redactArgs(os.Args), "\x00"))
}
