package bench

import (
	"strings"
	"testing"
	"time"
)

func TestNginxConfig(t *testing.T) {
	c := nginxConfig("/tmp/x", "127.0.0.1:8080", []string{"127.0.0.1:1", "127.0.0.1:2"})
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
	c := haproxyConfig("127.0.0.1:8080", []string{"127.0.0.1:1", "127.0.0.1:2"})
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
	var c OverheadConfig
	c.fillDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if c.Workers != 4 || c.ProxyCore != 0 || c.LoadCore != 1 || len(c.Policies) != 2 || c.Policies[0] != "cache_aware" {
		t.Errorf("defaults = %+v", c)
	}
	bad := OverheadConfig{Duration: 100 * time.Millisecond, Connections: -1, ProxyCore: 1, LoadCore: 1, StreamIntervalMS: -1}
	bad.fillDefaults()
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
	var c QualityConfig
	c.fillDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if got := c.WallRate(); got != 156 {
		t.Errorf("default wall rate %g, want 39 × 4 = 156", got)
	}
	if len(c.Policies) != 6 {
		t.Errorf("default policies %v, want the issue's six", c.Policies)
	}
	bad := QualityConfig{Workers: 1, TimeScale: -1, KVTokens: 100}
	bad.fillDefaults()
	err := bad.Validate()
	if err == nil {
		t.Fatal("bad config validated")
	}
	for _, hint := range []string{"at least 2", "must be positive", "raise --quality-kv-tokens"} {
		if !strings.Contains(err.Error(), hint) {
			t.Errorf("error %q lacks %q", err, hint)
		}
	}
}
