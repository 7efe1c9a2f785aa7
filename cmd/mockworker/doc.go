// Command mockworker serves a fleet of mock SGLang/vLLM workers (package mockworker):
//
//	mockworker --host 127.0.0.1 --port 18000 --count 4 --model M --dialect sglang
//	mockworker --port 0 --count 3 --mode engine --time-scale 10 --seed 1
//	mockworker --port 0 --count 8 --mode engine --decode-factors 6=2,7=2   # workers 6, 7 decode twice as slowly
//	mockworker --host 127.0.0.11 --port 18000 --role prefill --bootstrap-port 8998
//	mockworker --host 127.0.0.12 --port 18000 --role decode --kv-transfer-timeout-ms 10000
//	mockworker --host 127.0.0.13 --port 18000 --role encode --bootstrap-port 8999   # EPD
//	mockworker --port 0 --protocol grpc --dialect vllm --mode engine               # the engine's gRPC service
//	mockworker --port 0 --protocol grpc --tokenizer-path ~/models/Qwen3-8B           # answer ids decode to text
//
// It prints one line per worker once listening, so that a parent process can wait for
// readiness and learn the ports (--port 0 picks free ones):
//
//	mockworker: worker 0 listening on http://127.0.0.1:18000 (model M, dialect sglang)
//
// With --protocol grpc the URL is grpc://host:port.
//
// With --role prefill, decode or encode the line also names the role and the bootstrap port
// (a prefill's or encoder's bound rendezvous port, which --bootstrap-port 0 picks; a
// decode's default):
//
//	mockworker: worker 0 listening on http://127.0.0.11:18000 (model M, dialect sglang, role prefill, bootstrap port 8998)
//
// then serves until SIGINT or SIGTERM, closes the fleet and exits 0. A bad flag exits 2 with
// a message naming the flag; a fleet that cannot start (a port in use) exits 1.
//
// The command only maps flags onto mockworker.Config and waits for a signal; the one
// goroutine it adds is the signal wait. It owns no buffers.
package main
