package mesh

import (
	"testing"

	"github.com/smg-go/smg/internal/testutil"
)

// TestMain fails the package if a test leaves a goroutine behind.
func TestMain(m *testing.M) { testutil.VerifyNoLeaks(m) }
