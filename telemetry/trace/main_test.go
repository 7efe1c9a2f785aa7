package trace

import (
	"testing"

	"github.com/smg-go/smg/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyNoLeaks(m) }
