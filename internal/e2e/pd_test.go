package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/smg-go/smg/discovery/k8s/k8stest"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/mockworker"
	"github.com/smg-go/smg/mockworker/mockworkertest"
)

// Prefill-decode disaggregation end to end: a real smg in PD mode in front of mock engines
// playing the prefill and decode roles. The mocks hand the KV over between themselves (the
// decode mock fetches the room or transfer id from the prefill mock), so a request whose legs
// disagree fails at the mock instead of succeeding silently.

// pdMock is one mockworker process in a PD role.
type pdMock struct {
	*Mocks
	host          string
	bootstrapPort int
}

// startPDMock starts count workers of a role on host (a 127.0.0.x address of its own, so that
// several prefill fleets can each have the default bootstrap port), with extra flags.
func startPDMock(t *testing.T, host, role, dialect string, count, bootstrapPort int, extra ...string) *pdMock {
	t.Helper()
	b := Build(t)
	args := []string{"--host", host, "--port", "0", "--count", strconv.Itoa(count), "--role", role, "--dialect", dialect,
		"--bootstrap-port", strconv.Itoa(bootstrapPort), "--kv-transfer-timeout-ms", "3000", "--output-tokens", "4"}
	args = append(args, extra...)
	m := &Mocks{Process: Start(t, b.MockWorker, args...)}
	testutil.Eventually(t, role+" mocks listening", func() bool {
		m.URLs = m.URLs[:0]
		for _, match := range listeningLine.FindAllStringSubmatch(m.Output(), -1) {
			m.URLs = append(m.URLs, match[1])
		}
		return len(m.URLs) == count
	})
	return &pdMock{Mocks: m, host: host, bootstrapPort: bootstrapPort}
}

// pdCount sums mockworker_pd_requests_total{role,result} over a fleet's workers.
func pdCount(t *testing.T, m *pdMock, role, result string) int {
	t.Helper()
	n := 0
	for _, u := range m.URLs {
		n += pdCountAt(t, u, role, result)
	}
	return n
}

// pdCountAt is mockworker_pd_requests_total{role,result} of the worker at url.
func pdCountAt(t *testing.T, url, role, result string) int {
	t.Helper()
	re := regexp.MustCompile(`mockworker_pd_requests_total\{[^}]*role="` + role + `"[^}]*result="` + result + `"[^}]*\} (\d+)`)
	n := 0
	r := MustDo(t, http.MethodGet, url+"/metrics", "", nil)
	for _, match := range re.FindAllStringSubmatch(r.Body, -1) {
		v, _ := strconv.Atoi(match[1])
		n += v
	}
	return n
}

// checkHandovers checks that the prefill mocks served n requests and the decode mocks
// confirmed n handovers, and that no mock counted a rejected, timed-out, mispaired or
// unreachable one.
func checkHandovers(t *testing.T, n int, prefill, decode []*pdMock) {
	t.Helper()
	count := func(ms []*pdMock, role, result string) (sum int) {
		for _, m := range ms {
			sum += pdCount(t, m, role, result)
		}
		return sum
	}
	if ok := count(prefill, "prefill", "ok"); ok != n {
		t.Errorf("prefill mocks served %d, want %d", ok, n)
	}
	if ok := count(decode, "decode", "ok"); ok != n {
		t.Errorf("decode mocks confirmed %d handovers, want %d", ok, n)
	}
	for _, bad := range []string{"rejected", "timeout", "mismatch", "unreachable"} {
		if c := count(prefill, "prefill", bad) + count(decode, "decode", bad); c != 0 {
			t.Errorf("%d handovers ended %s", c, bad)
		}
	}
}

// pdRequest is one generation request of the PD tests: its route, body and whether it streams.
type pdRequest struct {
	path, body string
	stream     bool
}

func pdRequests(n int, withGenerate bool) []pdRequest {
	var out []pdRequest
	for i := range n {
		prompt := fmt.Sprintf("pd request %d: %s", i, strings.Repeat("tell me more. ", i%5+1))
		stream := i%2 == 1
		switch k := i % 3; {
		case k == 0:
			out = append(out, pdRequest{"/v1/chat/completions", fmt.Sprintf(`{"model":"mock-model","messages":[{"role":"user","content":%q}],"stream":%v,"max_tokens":4}`, prompt, stream), stream})
		case k == 1 || !withGenerate:
			out = append(out, pdRequest{"/v1/completions", fmt.Sprintf(`{"model":"mock-model","prompt":%q,"stream":%v,"max_tokens":4}`, prompt, stream), stream})
		default:
			out = append(out, pdRequest{"/generate", fmt.Sprintf(`{"text":%q,"stream":%v,"sampling_params":{"max_new_tokens":4}}`, prompt, stream), stream})
		}
	}
	return out
}

// sendPD sends the requests from 4 clients at once and returns, per request, the prefill
// worker that served it; every answer must be a complete 200.
func sendPD(t *testing.T, g *Gateway, reqs []pdRequest) map[string]int {
	t.Helper()
	var mu sync.Mutex
	prefills := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan string, len(reqs))
	next := make(chan pdRequest, len(reqs))
	for _, r := range reqs {
		next <- r
	}
	close(next)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range next {
				resp, err := Do(http.MethodPost, g.URL+r.path, r.body, nil)
				switch {
				case err != nil:
					errs <- err.Error()
				case resp.Status != 200:
					errs <- fmt.Sprintf("%s: %d %s", r.path, resp.Status, resp.Body)
				case r.stream && !strings.HasSuffix(resp.Body, "data: [DONE]\n\n"):
					errs <- fmt.Sprintf("%s: stream without [DONE]: %q", r.path, resp.Body)
				case r.stream && strings.Contains(resp.Body, `"error"`):
					errs <- fmt.Sprintf("%s: stream with an error event: %q", r.path, resp.Body)
				default:
					mu.Lock()
					prefills[resp.Header.Get("X-Smg-Prefill-Worker-Id")]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if t.Failed() {
		t.FailNow()
	}
	return prefills
}

// TestPDSGLang: two prefill fleets (one with a bootstrap port, one with "none", i.e. the
// engine's default) and two decode workers; streamed and non-streamed requests on the three
// routes all succeed, the decode mocks confirm every room arrived from the prefill the gateway
// named, and both legs spread by their policies. Readiness waits for a decode worker, which
// the worker API can add.
func TestPDSGLang(t *testing.T) {
	p1 := startPDMock(t, "127.0.0.31", "prefill", "sglang", 1, FreePort(t, "127.0.0.31"))
	p2 := startPDMock(t, "127.0.0.32", "prefill", "sglang", 1, 8998)
	d := startPDMock(t, "127.0.0.33", "decode", "sglang", 2, 8998)

	g := StartGateway(t, "--pd-disaggregation",
		"--prefill", p1.URLs[0], strconv.Itoa(p1.bootstrapPort), "--prefill", p2.URLs[0], "none",
		"--prefill-policy", "round_robin", "--decode-policy", "round_robin")
	testutil.Eventually(t, "readiness 503 without a decode worker", func() bool {
		r, err := Do(http.MethodGet, g.URL+"/readiness", "", nil)
		return err == nil && r.Status == 503 && strings.Contains(r.Body, "no healthy decode workers") && strings.Contains(r.Body, `"healthy_prefill_workers":2`)
	})
	if r := MustDo(t, http.MethodPost, g.URL+"/workers", `{"url":"`+d.URLs[1]+`"}`, nil); r.Status != 400 || !strings.Contains(r.Body, "worker_type") {
		t.Fatalf("a regular worker in PD mode: %d %s", r.Status, r.Body)
	}
	for _, u := range d.URLs {
		if r := MustDo(t, http.MethodPost, g.URL+"/workers", `{"url":"`+u+`","worker_type":"decode"}`, nil); r.Status != 202 {
			t.Fatalf("adding a decode worker: %d %s", r.Status, r.Body)
		}
	}
	testutil.Eventually(t, "readiness 200 with both legs", func() bool {
		r, err := Do(http.MethodGet, g.URL+"/readiness", "", nil)
		return err == nil && r.Status == 200 && strings.Contains(r.Body, `"healthy_decode_workers":2`)
	})
	if r := MustDo(t, http.MethodGet, g.URL+"/workers", "", nil); !strings.Contains(r.Body, `"prefill_workers":2`) || !strings.Contains(r.Body, `"decode_workers":2`) {
		t.Fatalf("worker stats: %s", r.Body)
	}

	const n = 48
	prefills := sendPD(t, g, pdRequests(n, true))
	if prefills[p1.URLs[0]] != n/2 || prefills[p2.URLs[0]] != n/2 {
		t.Errorf("round_robin over two prefill workers: %v", prefills)
	}
	checkHandovers(t, n, []*pdMock{p1, p2}, []*pdMock{d})
	for _, u := range d.URLs {
		if got := pdCountAt(t, u, "decode", "ok"); got != n/2 {
			t.Errorf("round_robin over two decode workers: %s decoded %d of %d", u, got, n)
		}
	}
	for _, u := range d.URLs {
		v, _ := Metric(t, g.MetricsURL, fmt.Sprintf(`smg_worker_requests_active{worker=%q}`, u))
		if v != 0 {
			t.Errorf("decode worker %s still has %v requests in flight", u, v)
		}
	}
	// Selections per leg: /generate requests name no model, the others mock-model.
	for _, leg := range []string{"prefill", "decode"} {
		sum := 0.0
		for _, model := range []string{"mock-model", ""} {
			v, _ := Metric(t, g.MetricsURL, `smg_worker_selection_total{worker_type="`+leg+`",connection_mode="http",model="`+model+`",policy="round_robin"}`)
			sum += v
		}
		if int(sum) != n {
			t.Errorf("smg_worker_selection_total for the %s leg: %v, want %d", leg, sum, n)
		}
	}
}

// TestPDVLLM: vLLM's sequential handover (--kv-connector NixlConnector): the decode mocks
// receive the prefill's kv_transfer_params and fetch the KV with them.
func TestPDVLLM(t *testing.T) {
	p := startPDMock(t, "127.0.0.34", "prefill", "vllm", 2, FreePort(t, "127.0.0.34"))
	d := startPDMock(t, "127.0.0.35", "decode", "vllm", 2, 8998)
	g := StartGateway(t, "--pd-disaggregation", "--kv-connector", "NixlConnector",
		"--prefill", p.URLs[0], "--prefill", p.URLs[1], "--decode", d.URLs[0], "--decode", d.URLs[1],
		"--policy", "round_robin", "--decode-policy", "power_of_two")
	const n = 24
	prefills := sendPD(t, g, pdRequests(n, false))
	if prefills[p.URLs[0]] != n/2 || prefills[p.URLs[1]] != n/2 {
		t.Errorf("round_robin over two prefill workers: %v", prefills)
	}
	checkHandovers(t, n, []*pdMock{p}, []*pdMock{d})
	for _, u := range d.URLs {
		if got := pdCountAt(t, u, "decode", "ok"); got == 0 {
			t.Errorf("power_of_two never chose decode worker %s in %d requests", u, n)
		}
	}
	r := MustDo(t, http.MethodPost, g.URL+"/generate", `{"text":"x"}`, nil)
	if r.Status != 400 || !strings.Contains(r.Body, "vLLM") {
		t.Errorf("/generate to vLLM workers: %d %s", r.Status, r.Body)
	}
}

// TestPDBucketSeparatesShortAndLongPrompts: with --prefill-policy bucket, a bimodal workload
// (100-character and 1,500-character prompts, equal shares of characters) moves the boundary
// from the initial even split (both sizes below it, so one worker takes everything) to between
// the two modes: short prompts then go to one prefill worker and long prompts to the other.
// The balance fallback is turned off (--balance-abs-threshold) so that the test observes the
// buckets alone; the unit traces cover the balance check.
func TestPDBucketSeparatesShortAndLongPrompts(t *testing.T) {
	p := startPDMock(t, "127.0.0.36", "prefill", "sglang", 2, FreePort(t, "127.0.0.36"))
	d := startPDMock(t, "127.0.0.37", "decode", "sglang", 1, 8998)
	port := strconv.Itoa(p.bootstrapPort)
	g := StartGateway(t, "--pd-disaggregation", "--prefill", p.URLs[0], port, "--prefill", p.URLs[1], port,
		"--decode", d.URLs[0], "--prefill-policy", "bucket", "--decode-policy", "round_robin", "--balance-abs-threshold", "100000000")

	short, long := strings.Repeat("s", 100), strings.Repeat("l", 1500)
	send := func(prompt string) string {
		r := MustDo(t, http.MethodPost, g.URL+"/v1/completions", fmt.Sprintf(`{"model":"mock-model","prompt":%q,"max_tokens":2}`, prompt), nil)
		if r.Status != 200 {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		return r.Header.Get("X-Smg-Prefill-Worker-Id")
	}
	// Before any adjustment both sizes fall in the first range (the even split covers 4,096
	// characters).
	if s, l := send(short), send(long); s != l {
		t.Fatalf("before adaptation: short to %s, long to %s; the even split puts both on one worker", s, l)
	}
	// 15 short prompts per long one: equal characters. The policy re-checks every 5 s.
	testutil.Eventually(t, "bucket boundaries between the two modes", func() bool {
		for range 15 {
			send(short)
		}
		return send(short) != send(long)
	})
	shortTo, longTo := map[string]int{}, map[string]int{}
	for i := range 64 {
		if i%16 == 15 {
			longTo[send(long)]++
		} else {
			shortTo[send(short)]++
		}
	}
	if len(shortTo) != 1 || len(longTo) != 1 {
		t.Fatalf("after adaptation: short prompts went to %v, long prompts to %v", shortTo, longTo)
	}
	for w := range shortTo {
		if longTo[w] != 0 {
			t.Fatalf("short and long prompts share worker %s: %v %v", w, shortTo, longTo)
		}
	}
}

// TestPDDiscoveredRolesAndBootstrapPorts: PD pods on a real kube-apiserver, matched by role
// selectors, become prefill and decode workers of the real smg with the prefill pod's
// bootstrap-port annotation; requests then hand over through the port the annotation names.
func TestPDDiscoveredRolesAndBootstrapPorts(t *testing.T) {
	api, ns := startAPIServer(t, "pd")
	ctx := context.Background()
	pc := mockworker.DefaultConfig() // one worker on 127.0.0.1
	pc.Role, pc.EventLoops = mockworker.RolePrefill, 1
	prefill := mockworkertest.Start(t, pc)
	dc := mockworker.DefaultConfig()
	dc.Count, dc.Role, dc.EventLoops = 2, mockworker.RoleDecode, 1
	decode := mockworkertest.Start(t, dc)
	port := func(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }
	boot := strconv.Itoa(prefill.BootstrapPort())
	pods := []k8stest.PodSpec{
		{Namespace: ns, Name: "prefill-0", Labels: map[string]string{"app": "pd", "role": "prefill"},
			Annotations: map[string]string{annotationWorkerPorts: port(prefill.Addrs()[0]), annotationBootstrapPort: boot}},
		{Namespace: ns, Name: "decode-0", Labels: map[string]string{"app": "pd", "role": "decode"},
			Annotations: map[string]string{annotationWorkerPorts: port(decode.Addrs()[0]) + "," + port(decode.Addrs()[1])}},
		// Matches no role selector: ignored.
		{Namespace: ns, Name: "other-0", Labels: map[string]string{"app": "pd"},
			Annotations: map[string]string{annotationWorkerPorts: "1"}},
	}
	for _, p := range pods {
		if _, err := api.ReadyPod(ctx, p, "127.0.0.1"); err != nil {
			t.Fatal(err)
		}
	}
	g := startGatewayEnv(t, []string{"KUBECONFIG=" + api.Kubeconfig}, "--service-discovery", "--pd-disaggregation",
		"--prefill-selector", "app=pd", "role=prefill", "--decode-selector", "app=pd", "role=decode",
		"--service-discovery-namespace", ns, "--decode-policy", "round_robin")
	testutil.Eventually(t, "1 prefill and 2 decode workers discovered and ready", func() bool {
		r, err := Do(http.MethodGet, g.URL+"/readiness", "", nil)
		return err == nil && r.Status == 200 && strings.Contains(r.Body, `"healthy_prefill_workers":1`) && strings.Contains(r.Body, `"healthy_decode_workers":2`)
	})
	var view struct {
		Workers []struct {
			URL        string            `json:"url"`
			WorkerType string            `json:"worker_type"`
			Labels     map[string]string `json:"labels"`
		} `json:"workers"`
	}
	if err := json.Unmarshal([]byte(MustDo(t, http.MethodGet, g.URL+"/workers", "", nil).Body), &view); err != nil {
		t.Fatal(err)
	}
	roles := map[string]int{}
	for _, w := range view.Workers {
		roles[w.WorkerType]++
		if w.WorkerType == "prefill" && w.Labels[labelBootstrapPort] != boot {
			t.Errorf("prefill worker %s has bootstrap port label %q, want %s", w.URL, w.Labels[labelBootstrapPort], boot)
		}
	}
	if roles["prefill"] != 1 || roles["decode"] != 2 || len(view.Workers) != 3 {
		t.Fatalf("discovered roles %v", roles)
	}

	const n = 8
	sendPD(t, g, pdRequests(n, true))
	var ok uint64
	for _, w := range decode.Workers() {
		st := w.PDStats()
		if st.OK != n/2 || st.Rejected+st.Timeout+st.Mismatch+st.Unreachable != 0 {
			t.Errorf("decode worker %s: %+v, want %d handovers ok (round robin) and no failure", w.ID(), st, n/2)
		}
		ok += st.OK
		for _, tr := range w.PDTransfers() {
			if tr.Prefill != "127.0.0.1:"+boot {
				t.Errorf("a decode fetched its KV from %s, not the annotated bootstrap port %s", tr.Prefill, boot)
			}
		}
	}
	if ok != n {
		t.Errorf("%d handovers ok, want %d", ok, n)
	}
}

// PD over the engines' gRPC services: a real smg in PD mode in front of mock gRPC engines
// playing prefill and decode, in both dialects. The mocks hand the KV over as the HTTP ones
// do, so a leg with a wrong room, bootstrap address or kv_transfer_params fails at the mock.
func TestPDOverGRPC(t *testing.T) {
	for _, c := range []struct {
		dialect, prefillHost, decodeHost string
		flags                            []string
	}{
		{"sglang", "127.0.0.40", "127.0.0.41", nil},
		{"vllm", "127.0.0.42", "127.0.0.43", []string{"--kv-connector", "NixlConnector"}},
	} {
		t.Run(c.dialect, func(t *testing.T) {
			boot := FreePort(t, c.prefillHost)
			p := startGRPCMocks(t, 2, c.dialect, "--host", c.prefillHost, "--role", "prefill", "--bootstrap-port", strconv.Itoa(boot), "--kv-transfer-timeout-ms", "3000")
			d := startGRPCMocks(t, 2, c.dialect, "--host", c.decodeHost, "--role", "decode", "--bootstrap-port", strconv.Itoa(boot), "--kv-transfer-timeout-ms", "3000")
			args := append([]string{"--pd-disaggregation", "--model-path", qwen3Dir(t),
				"--prefill", p[0], strconv.Itoa(boot), "--prefill", p[1], strconv.Itoa(boot), "--decode", d[0], "--decode", d[1],
				"--prefill-policy", "round_robin", "--decode-policy", "round_robin"}, c.flags...)
			g := StartGateway(t, args...)
			const n = 8
			for i := range n {
				stream := i%2 == 1
				body := fmt.Sprintf(`{"model":"qwen3","messages":[{"role":"user","content":"Say something, %d."}],"stream":%v}`, i, stream)
				r := MustDo(t, http.MethodPost, g.URL+"/v1/chat/completions", body, nil)
				if r.Status != 200 || answerText(t, r.Body, stream) != mockworker.AnswerText {
					t.Fatalf("request %d (stream %v): %d %s", i, stream, r.Status, r.Body)
				}
			}
			// The gRPC mocks' metrics are on HTTP/1.1 on the same port.
			metricsOf := func(urls []string) []*pdMock {
				m := &Mocks{}
				for _, u := range urls {
					m.URLs = append(m.URLs, "http://"+strings.TrimPrefix(u, "grpc://"))
				}
				return []*pdMock{{Mocks: m}}
			}
			checkHandovers(t, n, metricsOf(p), metricsOf(d))
		})
	}
}

// answerText is the assistant's text of a chat completion, streamed (SSE deltas) or not.
func answerText(t *testing.T, body string, stream bool) string {
	t.Helper()
	if !stream {
		var resp struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(body), &resp); err != nil || len(resp.Choices) != 1 {
			t.Fatalf("chat answer: %v %s", err, body)
		}
		return resp.Choices[0].Message.Content
	}
	var text strings.Builder
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("SSE event %q: %v", data, err)
		}
		for _, ch := range ev.Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	return text.String()
}
