// Package syncbuf holds the buffer that tests and the benchmark harness give to loggers and
// child processes that write from several goroutines, while the test reads what was written.
package syncbuf
