package bench

import (
	"strings"
	"testing"
	"time"
)

func TestNginxConfig(t *testing.T) {
	c := nginxConfig("/tmp/x", "127.0.0.1:8080", []string{"127.0.0.1:1", "127.0.0.1:2"}, 1)
	for _, want := range []string{
		"daemon off;", "master_process off;", "worker_processes 1;", "pid /tmp/x/nginx.pid;",
		"server 127.0.0.1:1;", "server 127.0.0.1:2;", "keepalive 64;", "listen 127.0.0.1:8080;",
		"proxy_http_version 1.1;", `proxy_set_header Connection "";`, "proxy_buffering off;", "access_log off;",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("nginx config lacks %q:\n%s", want, c)
		}
	}
	if strings.Count(c, "{") != strings.Count(c, "}") {
		t.Errorf("unbalanced braces:\n%s", c)
	}
}

func TestHAProxyConfig(t *testing.T) {
	c := haproxyConfig("127.0.0.1:8080", []string{"127.0.0.1:1", "127.0.0.1:2"}, 1)
	for _, want := range []string{
		"nbthread 1", "mode http", "option http-no-delay", "http-reuse always", "bind 127.0.0.1:8080",
		"balance roundrobin", "server w0 127.0.0.1:1", "server w1 127.0.0.1:2",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("haproxy config lacks %q:\n%s", want, c)
		}
	}
}

func TestHostPorts(t *testing.T) {
	got := hostPorts([]string{"http://127.0.0.1:1", "http://127.0.0.2:2/", "127.0.0.3:3"})
	want := []string{"127.0.0.1:1", "127.0.0.2:2", "127.0.0.3:3"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("hostPorts = %v, want %v", got, want)
	}
}

func TestOverheadConfigDefaultsAndValidate(t *testing.T) {
	c := DefaultOverheadConfig()
	c.derive()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if c.Workers != 4 || c.ProxyCore != 0 || c.LoadCore != 1 || len(c.Policies) != 2 || c.Policies[0] != "cache_aware" {
		t.Errorf("defaults = %+v", c)
	}
	bad := DefaultOverheadConfig()
	bad.Duration, bad.Connections, bad.ProxyCore, bad.LoadCore, bad.StreamIntervalMS = 100*time.Millisecond, -1, 1, 1, -1
	bad.derive()
	err := bad.Validate()
	if err == nil {
		t.Fatal("bad config validated")
	}
	for _, hint := range []string{"use at least 1s", "connections and workers ≥ 1", "give the proxy a core of its own", "positive interval"} {
		if !strings.Contains(err.Error(), hint) {
			t.Errorf("error %q lacks %q", err, hint)
		}
	}
}

func TestQualityConfigDefaultsAndValidate(t *testing.T) {
	c := DefaultQualityConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if len(c.Policies) != 7 || c.Policies[0] != "round_robin" || len(c.LoadPolicies) != 3 || c.Repeats != 3 || c.LoadFraction != 0.7 {
		t.Errorf("defaults: policies %v, load policies %v, repeats %d, fraction %g; want the issue's seven, three load-aware, 3, 0.7",
			c.Policies, c.LoadPolicies, c.Repeats, c.LoadFraction)
	}
	if got := strings.Join(QualityCaseNames(), ","); got != "shared-prefix,multi-turn,mixed-size,heterogeneous,shared-prefix-grpc,kv-events-grpc" || len(c.Cases) != 6 {
		t.Errorf("cases %s (%d configured), want the four HTTP workloads, shared-prefix over gRPC and the KV-events case", got, len(c.Cases))
	}
	noTokenizer := DefaultQualityConfig()
	noTokenizer.TokenizerDir = t.TempDir()
	if err := noTokenizer.Validate(); err == nil || !strings.Contains(err.Error(), "leave out the -grpc cases") {
		t.Errorf("gRPC cases without a tokenizer: %v", err)
	}
	bad := DefaultQualityConfig()
	bad.Workers, bad.SatDuration, bad.LoadFraction, bad.Repeats = 1, time.Millisecond, 1.5, -1
	bad.Policies, bad.Cases = []string{"random"}, []QualityCase{{Name: "a b"}, {Name: "x", SatTimeScale: 1, LoadTimeScale: 1, SatClients: 1, Loadgen: []string{"--workload", "raw"}}}
	err := bad.Validate()
	if err == nil {
		t.Fatal("bad config validated")
	}
	caseBad := DefaultQualityConfig()
	caseBad.Cases = []QualityCase{{Name: "x", SatTimeScale: 1, LoadTimeScale: 1, SatClients: 1, Loadgen: []string{"--workload", "raw"},
		Gateways: -1, RestartAt: 1, Policies: []string{"cache_aware", EventsPolicy}}}
	if err := caseBad.Validate(); err == nil || !strings.Contains(err.Error(), "a restart point in [0, 1) and case policies that include round_robin") {
		t.Errorf("a case with -1 gateways, a restart at the end and no round robin: %v", err)
	}
	for _, hint := range []string{"at least 2", "at least 1s each", "load in (0, 1]", "use positive values",
		"include round_robin in the saturation policies or give --quality-capacity", `quality case "a b"`, "give positive time scales"} {
		if !strings.Contains(err.Error(), hint) {
			t.Errorf("error %q lacks %q", err, hint)
		}
	}
	negative := DefaultQualityConfig()
	negative.Capacity = -2
	if err := negative.Validate(); err == nil || !strings.Contains(err.Error(), "use 0 (measure round robin's)") {
		t.Errorf("negative capacity: %v", err)
	}
	// Without saturation rows a given capacity is enough.
	ok := DefaultQualityConfig()
	ok.Policies, ok.Capacity = []string{}, 56
	if err := ok.Validate(); err != nil || len(ok.Policies) != 0 {
		t.Errorf("load rows at a given capacity: %v (policies %v)", err, ok.Policies)
	}
}

func TestSelectQualityCases(t *testing.T) {
	all, err := SelectQualityCases(nil)
	if err != nil || len(all) != 6 {
		t.Fatalf("all cases: %d, %v", len(all), err)
	}
	two, err := SelectQualityCases([]string{"heterogeneous", "shared-prefix"})
	if err != nil || len(two) != 2 || two[0].Name != "heterogeneous" || two[1].Name != "shared-prefix" {
		t.Fatalf("two cases: %+v, %v", two, err)
	}
	if got := strings.Join(two[0].Mock, " "); got != "--decode-factors 6=2,7=2 --max-running 32" {
		t.Errorf("heterogeneous mock flags %q: want two slow decoders and batches of at most 32", got)
	}
	if !two[0].SatNoStream || two[0].SatSettle <= 0 || two[1].SatNoStream || two[1].SatSettle != 0 {
		t.Errorf("heterogeneous saturation rows not streamed and settled, shared-prefix's streamed at once: %+v, %+v", two[0], two[1])
	}
	if _, err := SelectQualityCases([]string{"nope"}); err == nil || !strings.Contains(err.Error(), "use shared-prefix, multi-turn") {
		t.Errorf("unknown case: %v", err)
	}
}

func TestPacedConfig(t *testing.T) {
	for _, tc := range []struct {
		name   string
		set    func(c *OverheadConfig) // on DefaultOverheadConfig
		paced  bool
		errSub string // "" = valid
	}{
		{name: "defaults", set: func(c *OverheadConfig) { c.Rounds = 2 }, paced: true},
		{name: "skipped", set: func(c *OverheadConfig) { c.PacedRounds, c.PacedIntervalMS = -1, -5 }, paced: false},
		{name: "no streams", set: func(c *OverheadConfig) { c.StreamTokens, c.PacedDuration = -1, time.Millisecond }, paced: false},
		{name: "no streams (0)", set: func(c *OverheadConfig) { c.StreamTokens, c.PacedDuration = 0, time.Millisecond }, paced: false},
		{name: "negative interval", set: func(c *OverheadConfig) { c.PacedIntervalMS = -1 }, paced: true, errSub: "use a positive interval, connections ≥ 1"},
		{name: "zero interval", set: func(c *OverheadConfig) { c.PacedIntervalMS = 0 }, paced: true, errSub: "bench.DefaultOverheadConfig()"},
		{name: "no connections", set: func(c *OverheadConfig) { c.PacedConnections = -3 }, paced: true, errSub: "connections ≥ 1"},
		{name: "shorter than two streams", set: func(c *OverheadConfig) { c.PacedIntervalMS, c.PacedDuration = 100, 5*time.Second }, paced: true,
			errSub: "two streams' length (32 tokens × 100 ms = 3.2s each)"},
		{name: "under a second", set: func(c *OverheadConfig) { c.PacedIntervalMS, c.PacedDuration = 1, 500*time.Millisecond }, paced: true, errSub: "at least 1s"},
		{name: "long enough", set: func(c *OverheadConfig) { c.PacedIntervalMS, c.PacedDuration = 100, 7*time.Second }, paced: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultOverheadConfig()
			tc.set(&c)
			c.derive()
			if got := c.paced(); got != tc.paced {
				t.Errorf("paced() = %v, want %v", got, tc.paced)
			}
			err := c.Validate()
			switch {
			case tc.errSub == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tc.errSub != "" && (err == nil || !strings.Contains(err.Error(), tc.errSub)):
				t.Errorf("Validate = %v, want an error with %q", err, tc.errSub)
			}
		})
	}
	c := DefaultOverheadConfig()
	c.Rounds = 2
	c.derive()
	if c.PacedRounds != 2 || c.PacedIntervalMS != 20 || c.PacedConnections != 256 || c.PacedDuration != 4*time.Second || c.PacedWarmup != 256 {
		t.Errorf("paced defaults: rounds %d interval %g connections %d duration %v warmup %d; want 2, 20, 256, 4s, 256",
			c.PacedRounds, c.PacedIntervalMS, c.PacedConnections, c.PacedDuration, c.PacedWarmup)
	}
	if l := c.pacedLoad(); l.kind != "sse_paced" || !l.stream || l.connections != 256 || l.duration != 4*time.Second || l.warmup != 256 {
		t.Errorf("pacedLoad = %+v", l)
	}
	if got := c.pacedStream(); got != 640*time.Millisecond {
		t.Errorf("pacedStream = %v, want 32 × 20 ms", got)
	}
	if ls := c.loads(); len(ls) != 2 || ls[0].kind != "json" || ls[1].kind != "sse" || ls[1].connections != 32 || ls[1].warmup != 2000 {
		t.Errorf("regular loads = %+v: the paced settings must not leak into them", ls)
	}
}

func TestWithSkippedBare(t *testing.T) {
	keys := func(ms []Measurement) string {
		var ks []string
		for _, m := range ms {
			k := m.Key
			if m.NotInstalled != "" {
				k += "(skipped)"
			}
			ks = append(ks, k)
		}
		return strings.Join(ks, ",")
	}
	for _, tc := range []struct{ in, want string }{
		{"direct,smg-a,smg-b,nginx,haproxy", "direct,smg-a,smg-b,bare(skipped),nginx,haproxy"},
		{"direct,smg-a", "direct,smg-a,bare(skipped)"},
		{"", "bare(skipped)"},
	} {
		var ms []Measurement
		for _, k := range strings.Split(tc.in, ",") {
			if k != "" {
				ms = append(ms, Measurement{Key: k})
			}
		}
		if got := keys(withSkippedBare(ms)); got != tc.want {
			t.Errorf("withSkippedBare(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// Zero is not "the default": a config not built from its DefaultXConfig is
// refused on the fields whose zero makes no sense, each message saying where to start.
func TestZeroConfigsAreRefused(t *testing.T) {
	o := OverheadConfig{LoadCore: 1}
	o.derive()
	q := QualityConfig{Cases: DefaultQualityCases()}
	if err := DefaultMicroConfig().Validate(); err != nil {
		t.Errorf("DefaultMicroConfig: %v", err)
	}
	for name, err := range map[string]error{"overhead": o.Validate(), "quality": q.Validate(), "micro": MicroConfig{}.Validate()} {
		if err == nil || !strings.Contains(err.Error(), "bench.Default") {
			t.Errorf("zero %s config: %v, want it refused with a pointer to its DefaultConfig", name, err)
		}
	}
	for _, hint := range []string{"overhead duration 0s", "overhead rounds 0", "policies", "connections 0, workers 0"} {
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), hint) {
			t.Errorf("zero overhead config: %v, want it to name %q", err, hint)
		}
	}
	for _, hint := range []string{"quality workers 0", "quality durations 0s", "repeats 0"} {
		if err := q.Validate(); err == nil || !strings.Contains(err.Error(), hint) {
			t.Errorf("zero quality config: %v, want it to name %q", err, hint)
		}
	}
}
