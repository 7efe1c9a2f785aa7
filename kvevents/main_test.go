package kvevents

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine is left behind. zmq4's PUB socket never stops its
// writer goroutine (pubMWriter.run waits on a condition its Close does not reach); only the
// tests' fake engines use PUB sockets, the consumers do not.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/go-zeromq/zmq4.(*pubMWriter).run"))
}
