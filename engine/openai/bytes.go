package openai

import "unsafe"

// bstr views b as a string without copying, for appends that only read it.
func bstr(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
