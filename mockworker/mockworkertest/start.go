package mockworkertest

import (
	"testing"

	"github.com/smg-go/smg/mockworker"
)

// Start starts a fleet of cfg (start from mockworker.DefaultConfig) and closes it when the
// test ends; a fleet that does not start fails the test.
func Start(t testing.TB, cfg mockworker.Config) *mockworker.Fleet {
	t.Helper()
	f, err := mockworker.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}
