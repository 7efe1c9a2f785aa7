// Package promlabel quotes Prometheus label values: the one way every package builds a
// series name such as `smg_worker_health{worker="http://10.0.0.7:8000"}`.
//
// Go's %q and strconv.Quote are not Prometheus escaping: they write tabs, control and
// non-ASCII characters as Go escapes (\t, \x01, \u00e9), which a Prometheus parser reads as
// the literal characters backslash, t and so on, so a model named "modèle" would be exported
// as "mod\u00e8le". The text exposition format escapes only backslash, double quote and line
// feed.
package promlabel
