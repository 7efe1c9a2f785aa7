// Package cli parses command lines the way the spec product's users type them: GNU-style long
// flags (--name value, --name=value), boolean flags without a value, and list flags that take
// every following word up to the next flag (--worker-urls http://a:8000 http://b:8000) and may
// repeat. The standard library's flag package cannot take space-separated lists, which the
// spec's command lines use throughout.
//
// Errors name the flag and say how to fix it. A FlagSet also renders its flags as a Markdown
// table, so the README's flag table is generated from the code and a test keeps it true.
//
// A FlagSet is not safe for concurrent use; parse once at start-up.
package cli
