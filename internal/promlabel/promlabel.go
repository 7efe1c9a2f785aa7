package promlabel

import "strings"

// escaper applies the exposition format's three escapes.
var escaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// Quote returns v as a quoted label value: `"` + v with backslash, double quote and line feed
// escaped + `"`.
func Quote(v string) string { return `"` + escaper.Replace(v) + `"` }
