package helmchart

import (
	"encoding/json"
	"strings"
	"testing"
)

// gatewayArgs returns the rendered gateway container's command line, joined by spaces.
func gatewayArgs(t *testing.T, sets ...string) string {
	t.Helper()
	for _, o := range render(t, "rel", "default", nil, sets...) {
		if o.GetKind() != "Deployment" && o.GetKind() != "StatefulSet" {
			continue
		}
		b, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "--prometheus-port") {
			return string(b)
		}
	}
	t.Fatal("no rendered workload passes --prometheus-port")
	return ""
}

// TestChartKeepsPprofOnLoopbackUnlessAsked: by default the chart leaves pprof answering
// loopback clients only (the Service's metrics port then does not expose it);
// gateway.pprofAllowRemote passes --pprof-allow-remote.
func TestChartKeepsPprofOnLoopbackUnlessAsked(t *testing.T) {
	if args := gatewayArgs(t); strings.Contains(args, "pprof-allow-remote") {
		t.Errorf("the default chart opens pprof to remote clients: %s", args)
	}
	if args := gatewayArgs(t, `gateway.pprofAllowRemote=true`); !strings.Contains(args, "--pprof-allow-remote") {
		t.Errorf("gateway.pprofAllowRemote=true does not pass --pprof-allow-remote: %s", args)
	}
}
