package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Per-policy end-to-end tests: a real smg in front of real mock workers, the serving worker
// observed through x-smg-routed-worker-id.

// chatWith is a chat request whose routing text is prompt.
func chatWith(prompt string) string {
	return fmt.Sprintf(`{"model":"mock-model","messages":[{"role":"user","content":%q}]}`, prompt)
}

// routed sends one chat request and returns the worker that served it.
func routed(t *testing.T, g *Gateway, body string, header map[string]string) string {
	t.Helper()
	r := MustDo(t, "POST", g.URL+"/v1/chat/completions", body, header)
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	w := r.Header.Get("X-Smg-Routed-Worker-Id")
	if w == "" {
		t.Fatal("no x-smg-routed-worker-id header")
	}
	return w
}

// longPrompt is a distinct prompt of about 1,300 characters whose first bytes already differ
// from every other i (cache_aware shards its tree on the first 64 bytes; prefix_hash hashes the
// first 1,024 characters).
func longPrompt(i int) string {
	return fmt.Sprintf("conversation %04d: ", i) + strings.Repeat(fmt.Sprintf("turn %d says something long. ", i), 40)
}

func TestPrefixPoliciesKeepAPromptOnOneWorker(t *testing.T) {
	for _, name := range []string{"cache_aware", "prefix_hash"} {
		t.Run(name, func(t *testing.T) {
			m := StartMocks(t, 3)
			g := StartGateway(t, append([]string{"--policy", name, "--worker-urls"}, m.URLs...)...)
			body := chatWith(longPrompt(0))
			first := routed(t, g, body, nil)
			for range 5 {
				if got := routed(t, g, body, nil); got != first {
					t.Fatalf("the same prompt went to %s, then %s", first, got)
				}
			}
			seen := map[string]bool{}
			for i := 1; i <= 12; i++ {
				seen[routed(t, g, chatWith(longPrompt(i)), nil)] = true
			}
			if len(seen) < 2 {
				t.Fatalf("12 distinct prompts all went to %v", seen)
			}
		})
	}
}

func TestTargetWorkerHeader(t *testing.T) {
	m := StartMocks(t, 3)
	g := StartGateway(t, append([]string{"--policy", "consistent_hashing", "--worker-urls"}, m.URLs...)...)
	for range 3 {
		if got := routed(t, g, chat, map[string]string{"X-SMG-Target-Worker": "1"}); got != m.URLs[1] {
			t.Fatalf("X-SMG-Target-Worker: 1 went to %s, want %s", got, m.URLs[1])
		}
	}
	for _, v := range []string{"9", "x"} {
		r := MustDo(t, "POST", g.URL+"/v1/chat/completions", chat, map[string]string{"X-SMG-Target-Worker": v})
		if r.Status != 503 {
			t.Fatalf("X-SMG-Target-Worker: %s: status %d, want 503 (no fallback): %s", v, r.Status, r.Body)
		}
	}
}

func TestRoutingKeyStaysOnOneWorker(t *testing.T) {
	for _, name := range []string{"consistent_hashing", "manual"} {
		t.Run(name, func(t *testing.T) {
			m := StartMocks(t, 4)
			g := StartGateway(t, append([]string{"--policy", name, "--worker-urls"}, m.URLs...)...)
			seen := map[string]bool{}
			for k := range 8 {
				h := map[string]string{"X-SMG-Routing-Key": fmt.Sprintf("user-%d", k)}
				first := routed(t, g, chat, h)
				seen[first] = true
				for range 5 {
					if got := routed(t, g, chat, h); got != first {
						t.Fatalf("key user-%d went to %s, then %s", k, first, got)
					}
				}
			}
			if len(seen) < 2 {
				t.Fatalf("8 keys all went to %v", seen)
			}
		})
	}
}

// TestLoadAwarePoliciesAvoidASlowWorker slows one mock worker down (every answer held 300 ms)
// and sends 90 requests, 9 at a time: the slow worker's requests stay in flight, so
// power_of_two and least_load send it clearly fewer than a fair third.
func TestLoadAwarePoliciesAvoidASlowWorker(t *testing.T) {
	for _, name := range []string{"power_of_two", "least_load"} {
		t.Run(name, func(t *testing.T) {
			m := StartMocks(t, 3)
			g := StartGateway(t, append([]string{"--policy", name, "--worker-urls"}, m.URLs...)...)
			slow := m.URLs[0]
			if r := MustDo(t, "POST", slow+"/admin/config", `{"delay_ms":300}`, nil); r.Status != 200 {
				t.Fatalf("slowing the worker: %d %s", r.Status, r.Body)
			}
			var mu sync.Mutex
			counts := map[string]int{}
			var wg sync.WaitGroup
			for c := range 9 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 10 {
						r, err := Do("POST", g.URL+"/v1/chat/completions", chatWith(fmt.Sprintf("q %d %d", c, i)), nil)
						if err != nil || r.Status != 200 {
							t.Errorf("request: %v %v", err, r)
							return
						}
						mu.Lock()
						counts[r.Header.Get("X-Smg-Routed-Worker-Id")]++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			fast := (counts[m.URLs[1]] + counts[m.URLs[2]]) / 2
			if counts[slow]*2 >= fast {
				t.Fatalf("the slow worker got %d requests, the fast ones %d and %d: want clearly fewer",
					counts[slow], counts[m.URLs[1]], counts[m.URLs[2]])
			}
			t.Logf("%s: slow %d, fast %d and %d", name, counts[slow], counts[m.URLs[1]], counts[m.URLs[2]])
		})
	}
}
