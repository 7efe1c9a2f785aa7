// Package jsonscan holds the JSON scanning that fastpath/extract (routing fields of a
// request body) and fastpath/disagg (PD body rewriting) share, so that both validate bodies
// by one set of rules and a fix to them lands in both: whitespace, literals, numbers,
// strings (validation, and decoding of the escapes), the separators after a value, and
// skipping a value of any depth.
//
// # Contract
//
//   - Validation is RFC 8259 and as strict as encoding/json (json.Valid accepts exactly the
//     texts SkipValue accepts at depth 0 with nothing after, fuzzed), with one deliberate
//     exception: invalid UTF-8 inside strings is passed through as sent, as
//     fastpath/extract's documentation explains. Escapes decode exactly as encoding/json
//     decodes them (a surrogate pair of \u escapes is one rune, a lone escaped surrogate
//     U+FFFD).
//   - Nesting is limited to MaxDepth levels, encoding/json's limit. Containers are walked
//     iteratively with one bit per level in a Stack that the caller owns, so hostile input
//     costs neither recursion nor allocation.
//   - Nothing allocates (tested with testing.AllocsPerRun), except that AppendString and
//     AppendUnescaped grow dst when it lacks capacity. The input is never written to.
//   - Failures are values, not errors: every scan returns a position and a Kind, and on
//     failure the position is the offset of the byte at fault (the body's length when it
//     ended too early; for Unterminated, the opening quote). Callers word the error for
//     their own users: fastpath/extract turns it into a client-facing message, disagg into a
//     sentinel. This package has no messages of its own.
//   - Every function is pure and safe for concurrent use. Positions are indexes into the
//     caller's buffer; on success they point just past what was scanned.
//
// What stays with the callers is their structure: extract walks the members routing reads
// with its own field logic and error wording, disagg copies and replaces top-level members.
//
// # Speed
//
// This is the gateway's hot path (docs/architecture.md). Short strings take one 16-byte SWAR step;
// long ones are searched with bytes.IndexByte (vectorised in the runtime) for the closing
// quote and the escapes, and checked for control characters 64 bytes per step. SkipWS,
// Peek, Literal and Next are small enough for the compiler to inline into the callers'
// wrappers (check with go build -gcflags=-m).
package jsonscan
