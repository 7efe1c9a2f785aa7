// Command smg is the SMG-Go gateway: `smg launch [flags]` (or `smg [flags]`) serves an
// OpenAI-compatible endpoint in front of a fleet of SGLang and vLLM workers.
package main
