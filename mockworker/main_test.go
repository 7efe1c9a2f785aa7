package mockworker

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/smg-go/smg/internal/testutil"
)

// TestMain fails the package if a goroutine is left behind. zmq4's PUB writer is the
// library's own: its Close never stops it (the mock engines publish KV events on PUB sockets).
func TestMain(m *testing.M) {
	testutil.VerifyNoLeaks(m, goleak.IgnoreAnyFunction("github.com/go-zeromq/zmq4.(*pubMWriter).run"))
}
