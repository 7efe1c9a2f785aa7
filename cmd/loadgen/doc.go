// Command loadgen drives load against an OpenAI-compatible endpoint and reports serving
// statistics; see package loadgen. Usage:
//
//	loadgen [run] --base-url http://host:port/v1 --model M [flags]   run a benchmark
//	loadgen [run] --pd-prefill URL --pd-bootstrap-port N|none --pd-decode URL --model M [flags]
//	                                                               PD mode: each request to a
//	                                                               prefill and a decode worker
//	loadgen compare base.json new.json --max-regression 5%         exit 1 on a regression
//	loadgen report result.json --html report.html                  summary and HTML of a saved result
//	loadgen fakeserver --listen 127.0.0.1:8000                     serve a fake engine
//
// Exit status: 0 success; 1 the run could not be done, no request succeeded, or compare
// found a regression; 2 bad flags or configuration.
//
// The command only turns flags into a loadgen.Config (documented there, with its defaults)
// and wires signals and files; all behaviour lives in package loadgen. One interrupt stops
// issuing requests and reports what finished; a second one kills the process.
package main
