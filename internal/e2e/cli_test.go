package e2e

import (
	"strings"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
)

// TestRouterSelectorWithoutDiscoveryIsExplained: a real smg given --router-selector without
// --service-discovery says why the selector does nothing (docs/differences.md).
func TestRouterSelectorWithoutDiscoveryIsExplained(t *testing.T) {
	g := StartGateway(t, "--router-selector", "app=smg")
	testutil.Eventually(t, "the router selector warning", func() bool {
		return strings.Contains(g.Output(), `level=WARN msg="Router selector configured but service discovery is not enabled"`)
	})
}
