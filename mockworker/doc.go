// Package mockworker implements mock SGLang and vLLM engines for tests and benchmarks.
package mockworker
