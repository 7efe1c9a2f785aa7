package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/discovery/k8s/k8stest"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/mockworker"
	"github.com/smg-go/smg/mockworker/mockworkertest"
)

// Encode-prefill-decode disaggregation end to end: a real smg in EPD mode in front of mock
// engines in the encode, prefill and decode roles. In SGLang's dialect the encode mock
// publishes the request's embedding record under the room the gateway gave it, and the
// prefill mock (--require-encode: language only) claims it from the encode worker the
// gateway named before it computes, failing the request otherwise; the decode mock then
// claims the prefill's KV as in PD mode. So a request whose three legs disagree fails at a
// mock instead of succeeding silently.

// epdRequests mixes multimodal requests (chat with an image part, chat with audio, SGLang's
// /generate with image_data; streamed and not) with text-only chat, which skips the encode
// leg. media counts the multimodal ones.
func epdRequests(n int, withGenerate bool) (reqs []pdRequest, media int) {
	for i := range n {
		prompt := fmt.Sprintf("epd request %d: what is in the picture? %s", i, strings.Repeat("look closely. ", i%3+1))
		stream := i%2 == 1
		switch k := i % 4; {
		case k == 0 || k == 2 && !withGenerate:
			reqs = append(reqs, pdRequest{"/v1/chat/completions", fmt.Sprintf(`{"model":"mock-model","messages":[{"role":"user","content":[{"type":"text","text":%q},{"type":"image_url","image_url":{"url":"http://images.test/%d.png"}}]}],"stream":%v,"max_tokens":4}`, prompt, i, stream), stream})
			media++
		case k == 1:
			reqs = append(reqs, pdRequest{"/v1/chat/completions", fmt.Sprintf(`{"model":"mock-model","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}},{"type":"text","text":%q}]}],"stream":%v,"max_tokens":4}`, prompt, stream), stream})
			media++
		case k == 2:
			reqs = append(reqs, pdRequest{"/generate", fmt.Sprintf(`{"text":%q,"image_data":"http://images.test/%d.png","stream":%v,"sampling_params":{"max_new_tokens":4}}`, prompt, i, stream), stream})
			media++
		default:
			reqs = append(reqs, pdRequest{"/v1/chat/completions", fmt.Sprintf(`{"model":"mock-model","messages":[{"role":"user","content":%q}],"stream":%v,"max_tokens":4}`, prompt, stream), stream})
		}
	}
	return reqs, media
}

// checkNoneInFlight waits until every worker's in-flight count on the gateway is back to 0.
func checkNoneInFlight(t *testing.T, g *Gateway, urls ...string) {
	t.Helper()
	for _, u := range urls {
		testutil.Eventually(t, "no request in flight on "+u, func() bool {
			v, ok := Metric(t, g.MetricsURL, fmt.Sprintf(`smg_worker_requests_active{worker=%q}`, u))
			return ok && v == 0
		})
	}
}

// legSelections sums smg_worker_selection_total of one leg and policy over the models the
// requests name (/generate names none).
func legSelections(t *testing.T, g *Gateway, leg, policy string) int {
	t.Helper()
	sum := 0.0
	for _, model := range []string{"mock-model", ""} {
		v, _ := Metric(t, g.MetricsURL, `smg_worker_selection_total{worker_type="`+leg+`",connection_mode="http",model="`+model+`",policy="`+policy+`"}`)
		sum += v
	}
	return int(sum)
}

// TestEPDSGLang: two encode workers (registered through the worker API once the gateway
// runs, since readiness waits for one), a language-only prefill and two decode workers.
// Streamed and non-streamed chat and /generate requests with images or audio go through all
// three legs, text-only ones through prefill and decode only; every leg spreads by its own
// policy, the mocks confirm every embedding and KV handover, and no request is left in
// flight anywhere.
func TestEPDSGLang(t *testing.T) {
	runEPDSGLang(t, "127.0.0.41", "127.0.0.42", "127.0.0.43")
}

func runEPDSGLang(t *testing.T, encodeHost, prefillHost, decodeHost string) {
	e := startPDMock(t, encodeHost, "encode", "sglang", 2, FreePort(t, encodeHost))
	p := startPDMock(t, prefillHost, "prefill", "sglang", 1, FreePort(t, prefillHost), "--require-encode")
	d := startPDMock(t, decodeHost, "decode", "sglang", 2, 8998)
	args := []string{"--epd-disaggregation",
		"--prefill", p.URLs[0], strconv.Itoa(p.bootstrapPort), "--decode", d.URLs[0], "--decode", d.URLs[1],
		"--encode-policy", "round_robin", "--prefill-policy", "random", "--decode-policy", "round_robin"}
	g := StartGateway(t, args...)
	testutil.Eventually(t, "readiness 503 without an encode worker", func() bool {
		r, err := Do(http.MethodGet, g.URL+"/readiness", "", nil)
		return err == nil && r.Status == 503 && strings.Contains(r.Body, "no healthy encode workers") &&
			strings.Contains(r.Body, `"healthy_prefill_workers":1`) && strings.Contains(r.Body, `"healthy_decode_workers":2`)
	})
	if r := MustDo(t, http.MethodPost, g.URL+"/workers", `{"url":"`+e.URLs[0]+`"}`, nil); r.Status != 400 || !strings.Contains(r.Body, `\"encode\"`) {
		t.Fatalf("a regular worker in EPD mode: %d %s", r.Status, r.Body)
	}
	for _, u := range e.URLs {
		spec := fmt.Sprintf(`{"url":%q,"worker_type":"encode","labels":{%q:"%d"}}`, u, labelBootstrapPort, e.bootstrapPort)
		if r := MustDo(t, http.MethodPost, g.URL+"/workers", spec, nil); r.Status != 202 {
			t.Fatalf("adding an encode worker: %d %s", r.Status, r.Body)
		}
	}
	testutil.Eventually(t, "readiness 200 with all three roles", func() bool {
		r, err := Do(http.MethodGet, g.URL+"/readiness", "", nil)
		return err == nil && r.Status == 200 && strings.Contains(r.Body, `"healthy_encode_workers":2`)
	})

	// One request of each kind, to read the workers the gateway names.
	mm, _ := epdRequests(1, true)
	r := MustDo(t, http.MethodPost, g.URL+mm[0].path, mm[0].body, nil)
	if r.Status != 200 || r.Header.Get("X-Smg-Encode-Worker-Id") == "" || r.Header.Get("X-Smg-Prefill-Worker-Id") != p.URLs[0] {
		t.Fatalf("multimodal request: %d, encode worker %q, prefill worker %q: %s", r.Status, r.Header.Get("X-Smg-Encode-Worker-Id"), r.Header.Get("X-Smg-Prefill-Worker-Id"), r.Body)
	}
	text := `{"model":"mock-model","messages":[{"role":"user","content":"no picture here"}],"max_tokens":4}`
	r = MustDo(t, http.MethodPost, g.URL+"/v1/chat/completions", text, nil)
	if r.Status != 200 || r.Header.Get("X-Smg-Encode-Worker-Id") != "" || r.Header.Get("X-Smg-Prefill-Worker-Id") != p.URLs[0] {
		t.Fatalf("text-only request: %d, encode worker %q (want none): %s", r.Status, r.Header.Get("X-Smg-Encode-Worker-Id"), r.Body)
	}

	const n = 48
	reqs, media := epdRequests(n, true)
	sendPD(t, g, reqs)
	media++ // the first request above
	e0, e1 := pdCountAt(t, e.URLs[0], "encode", "ok"), pdCountAt(t, e.URLs[1], "encode", "ok")
	if e0+e1 != media || e0-e1 > 1 || e1-e0 > 1 {
		t.Errorf("round_robin over two encode workers: they encoded %d and %d of %d multimodal requests", e0, e1, media)
	}
	checkHandovers(t, n+2, []*pdMock{p}, []*pdMock{d})
	for _, bad := range []string{"rejected", "timeout", "mismatch", "unreachable"} {
		if c := pdCount(t, e, "encode", bad); c != 0 {
			t.Errorf("%d encode requests ended %s", c, bad)
		}
	}
	for _, u := range d.URLs {
		if got := pdCountAt(t, u, "decode", "ok"); got != (n+2)/2 {
			t.Errorf("round_robin over two decode workers: %s decoded %d of %d", u, got, n+2)
		}
	}
	if got := legSelections(t, g, "encode", "round_robin"); got != media {
		t.Errorf("encode leg selections under round_robin: %d, want %d (one per multimodal request)", got, media)
	}
	if got := legSelections(t, g, "prefill", "random"); got != n+2 {
		t.Errorf("prefill leg selections under random: %d, want %d", got, n+2)
	}
	if got := legSelections(t, g, "decode", "round_robin"); got != n+2 {
		t.Errorf("decode leg selections under round_robin: %d, want %d", got, n+2)
	}
	checkNoneInFlight(t, g, append(append(append([]string{}, e.URLs...), p.URLs...), d.URLs...)...)
}

// TestEPDVLLM: vLLM's dialect (--kv-connector): the encode mocks get the request unstreamed
// with one output token (they refuse anything else), then the prefill and decode hand the KV
// over with kv_transfer_params. The consistent_hashing default of --encode-policy spreads
// the requests over both encode workers.
func TestEPDVLLM(t *testing.T) {
	e := startPDMock(t, "127.0.0.47", "encode", "vllm", 2, FreePort(t, "127.0.0.47"))
	p := startPDMock(t, "127.0.0.48", "prefill", "vllm", 1, FreePort(t, "127.0.0.48"))
	d := startPDMock(t, "127.0.0.49", "decode", "vllm", 1, 8998)
	g := StartGateway(t, "--epd-disaggregation", "--kv-connector", "NixlConnector",
		"--encode", e.URLs[0], "--encode", e.URLs[1], "--prefill", p.URLs[0], "--decode", d.URLs[0],
		"--policy", "round_robin")
	const n = 24
	reqs, media := epdRequests(n, false)
	sendPD(t, g, reqs)
	total := 0
	for _, u := range e.URLs {
		got := pdCountAt(t, u, "encode", "ok")
		if got == 0 {
			t.Errorf("consistent_hashing never chose encode worker %s in %d multimodal requests", u, media)
		}
		total += got
	}
	if total != media {
		t.Errorf("encode workers took %d requests, want %d (the multimodal ones)", total, media)
	}
	if c := pdCount(t, e, "encode", "rejected"); c != 0 {
		t.Errorf("%d encode requests rejected (streamed, or not max_tokens 1)", c)
	}
	checkHandovers(t, n, []*pdMock{p}, []*pdMock{d})
	if got := legSelections(t, g, "encode", "consistent_hashing"); got != media {
		t.Errorf("encode leg selections under consistent_hashing: %d, want %d", got, media)
	}
	r := MustDo(t, http.MethodPost, g.URL+"/generate", `{"text":"x","image_data":"http://images.test/a.png"}`, nil)
	if r.Status != 400 || !strings.Contains(r.Body, "vLLM") || pdCount(t, e, "encode", "ok") != media {
		t.Errorf("/generate to vLLM workers: %d %s (it must be refused before the encode leg)", r.Status, r.Body)
	}
	checkNoneInFlight(t, g, append(append(append([]string{}, e.URLs...), p.URLs...), d.URLs...)...)
}

// TestEPDEncodeFailureRetriesAndHangUp: an encode worker that answers 503 costs a retry on
// the other one, before any prefill or decode work; when both fail the client gets the
// encode worker's answer and the PD legs never start; a client that hangs up while the
// encode worker has not answered ends the encode leg, which is not blamed. The in-flight
// counts of every worker go back to 0 each time.
func TestEPDEncodeFailureRetriesAndHangUp(t *testing.T) {
	e := startPDMock(t, "127.0.0.51", "encode", "sglang", 2, FreePort(t, "127.0.0.51"))
	p := startPDMock(t, "127.0.0.52", "prefill", "sglang", 1, FreePort(t, "127.0.0.52"), "--require-encode")
	d := startPDMock(t, "127.0.0.53", "decode", "sglang", 1, 8998)
	port := strconv.Itoa(e.bootstrapPort)
	g := StartGateway(t, "--epd-disaggregation", "--encode", e.URLs[0], port, "--encode", e.URLs[1], port,
		"--prefill", p.URLs[0], strconv.Itoa(p.bootstrapPort), "--decode", d.URLs[0],
		"--encode-policy", "round_robin", "--cb-failure-threshold", "1000", "--retry-max-retries", "3")
	all := append(append(append([]string{}, e.URLs...), p.URLs...), d.URLs...)
	admin := func(url, config string) {
		t.Helper()
		if r := MustDo(t, http.MethodPost, url+"/admin/config", config, nil); r.Status != 200 {
			t.Fatalf("admin/config: %d %s", r.Status, r.Body)
		}
	}
	reqs, _ := epdRequests(1, true)
	mm := reqs[0]

	// One encode worker fails: every request is served through the other.
	admin(e.URLs[0], `{"status":503}`)
	for i := range 6 {
		r := MustDo(t, http.MethodPost, g.URL+mm.path, mm.body, nil)
		if r.Status != 200 || r.Header.Get("X-Smg-Encode-Worker-Id") != e.URLs[1] {
			t.Fatalf("request %d with a failing encode worker: %d via %q: %s", i, r.Status, r.Header.Get("X-Smg-Encode-Worker-Id"), r.Body)
		}
	}
	if got := pdCountAt(t, e.URLs[1], "encode", "ok"); got != 6 {
		t.Errorf("the healthy encode worker encoded %d, want 6", got)
	}
	checkHandovers(t, 6, []*pdMock{p}, []*pdMock{d})
	checkNoneInFlight(t, g, all...)

	// Both fail: the encode worker's own answer, and no PD leg.
	admin(e.URLs[1], `{"status":503}`)
	r := MustDo(t, http.MethodPost, g.URL+mm.path, mm.body, nil)
	if r.Status != 503 || !strings.Contains(r.Body, "mockworker injected status 503") {
		t.Fatalf("both encode workers failing: %d %s", r.Status, r.Body)
	}
	checkHandovers(t, 6, []*pdMock{p}, []*pdMock{d})
	checkNoneInFlight(t, g, all...)

	// The client leaves while the encode workers hold its request.
	for _, u := range e.URLs {
		admin(u, `{"status":0,"delay_ms":600000}`)
	}
	impatient := &http.Client{Timeout: 700 * time.Millisecond}
	req, _ := http.NewRequest(http.MethodPost, g.URL+mm.path, strings.NewReader(mm.body))
	if resp, err := impatient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the delayed encode worker answered: %d", resp.StatusCode)
	}
	checkNoneInFlight(t, g, all...)
	checkHandovers(t, 6, []*pdMock{p}, []*pdMock{d})
	for _, u := range e.URLs {
		if v, _ := Metric(t, g.MetricsURL, fmt.Sprintf(`smg_worker_cb_state{worker=%q}`, u)); v != 0 {
			t.Errorf("encode worker %s's breaker is %v after a client left it, want 0 (closed)", u, v)
		}
	}
}

// TestEPDDiscoveredRoles: encode, prefill and decode pods on a real kube-apiserver, matched
// by the three role selectors (a pod matching the encode and the prefill selector is an
// encode worker: encode comes first), become the workers of the real smg with the encode
// pod's bootstrap-port annotation; multimodal requests then reach the encode worker and the
// prefill claims its embeddings from the annotated port.
func TestEPDDiscoveredRoles(t *testing.T) {
	api, ns := startAPIServer(t, "epd")
	ctx := context.Background()
	start := func(role mockworker.Role, requireEncode bool) *mockworker.Fleet {
		cfg := mockworker.DefaultConfig() // one worker on 127.0.0.1
		cfg.Role, cfg.RequireEncode, cfg.EventLoops = role, requireEncode, 1
		return mockworkertest.Start(t, cfg)
	}
	encode := start(mockworker.RoleEncode, false)
	prefill := start(mockworker.RolePrefill, true)
	decode := start(mockworker.RoleDecode, false)
	port := func(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }
	encodeBoot, prefillBoot := strconv.Itoa(encode.BootstrapPort()), strconv.Itoa(prefill.BootstrapPort())
	pods := []k8stest.PodSpec{
		// Matches the encode and the prefill selector: encode wins.
		{Namespace: ns, Name: "encode-0", Labels: map[string]string{"app": "epd", "role": "prefill", "tier": "encode"},
			Annotations: map[string]string{annotationWorkerPorts: port(encode.Addrs()[0]), annotationBootstrapPort: encodeBoot}},
		{Namespace: ns, Name: "prefill-0", Labels: map[string]string{"app": "epd", "role": "prefill"},
			Annotations: map[string]string{annotationWorkerPorts: port(prefill.Addrs()[0]), annotationBootstrapPort: prefillBoot}},
		{Namespace: ns, Name: "decode-0", Labels: map[string]string{"app": "epd", "role": "decode"},
			Annotations: map[string]string{annotationWorkerPorts: port(decode.Addrs()[0])}},
	}
	for _, p := range pods {
		if _, err := api.ReadyPod(ctx, p, "127.0.0.1"); err != nil {
			t.Fatal(err)
		}
	}
	g := startGatewayEnv(t, []string{"KUBECONFIG=" + api.Kubeconfig}, "--service-discovery", "--epd-disaggregation",
		"--encode-selector", "app=epd", "tier=encode", "--prefill-selector", "app=epd", "role=prefill", "--decode-selector", "app=epd", "role=decode",
		"--service-discovery-namespace", ns)
	testutil.Eventually(t, "an encode, a prefill and a decode worker discovered and ready", func() bool {
		r, err := Do(http.MethodGet, g.URL+"/readiness", "", nil)
		return err == nil && r.Status == 200 && strings.Contains(r.Body, `"healthy_encode_workers":1`) &&
			strings.Contains(r.Body, `"healthy_prefill_workers":1`) && strings.Contains(r.Body, `"healthy_decode_workers":1`)
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
	roles := map[string]string{}
	for _, w := range view.Workers {
		roles[w.URL] = w.WorkerType
		if w.WorkerType == "encode" && w.Labels[labelBootstrapPort] != encodeBoot {
			t.Errorf("encode worker %s has bootstrap port label %q, want %s", w.URL, w.Labels[labelBootstrapPort], encodeBoot)
		}
	}
	if roles[encode.URLs()[0]] != "encode" || roles[prefill.URLs()[0]] != "prefill" || roles[decode.URLs()[0]] != "decode" || len(roles) != 3 {
		t.Fatalf("discovered roles %v", roles)
	}

	reqs, media := epdRequests(8, true)
	sendPD(t, g, reqs)
	if st := encode.Workers()[0].PDStats(); st.OK != uint64(media) || st.Rejected+st.Timeout+st.Mismatch+st.Unreachable != 0 {
		t.Errorf("encode worker: %+v, want %d encoded and no failure", st, media)
	}
	claims := 0
	for _, tr := range prefill.Workers()[0].PDTransfers() {
		if strings.HasPrefix(tr.Key, "encode:") {
			claims++
			if tr.Prefill != "127.0.0.1:"+encodeBoot || tr.Result != "ok" {
				t.Errorf("the prefill claimed embeddings from %s (%s), not the annotated encode bootstrap port %s", tr.Prefill, tr.Result, encodeBoot)
			}
		}
	}
	if claims != media {
		t.Errorf("the prefill claimed %d embeddings, want %d", claims, media)
	}
	if st := decode.Workers()[0].PDStats(); st.OK != 8 {
		t.Errorf("decode worker: %+v, want 8 handovers", st)
	}
}

// TestEPDHangUpCancelsThePDLegs: a client that leaves while the prefill and decode workers
// hold its image request (after the encode leg succeeded) gets both legs cancelled: every
// worker's in-flight count is back to 0 at once, although the held workers would answer only
// after 10 minutes, and no breaker blames them.
func TestEPDHangUpCancelsThePDLegs(t *testing.T) {
	e := startPDMock(t, "127.0.0.57", "encode", "sglang", 1, FreePort(t, "127.0.0.57"))
	p := startPDMock(t, "127.0.0.58", "prefill", "sglang", 1, FreePort(t, "127.0.0.58"), "--require-encode")
	d := startPDMock(t, "127.0.0.59", "decode", "sglang", 1, 8998)
	all := []string{e.URLs[0], p.URLs[0], d.URLs[0]}
	reqs, _ := epdRequests(1, true)
	mm := reqs[0]
	delay := func(ms int) {
		t.Helper()
		for _, u := range []string{p.URLs[0], d.URLs[0]} {
			if r := MustDo(t, http.MethodPost, u+"/admin/config", fmt.Sprintf(`{"delay_ms":%d}`, ms), nil); r.Status != 200 {
				t.Fatalf("admin/config: %d %s", r.Status, r.Body)
			}
		}
	}
	g := StartGateway(t, "--epd-disaggregation",
		"--encode", e.URLs[0], strconv.Itoa(e.bootstrapPort), "--prefill", p.URLs[0], strconv.Itoa(p.bootstrapPort), "--decode", d.URLs[0])
	if r := MustDo(t, http.MethodPost, g.URL+mm.path, mm.body, nil); r.Status != 200 {
		t.Fatalf("image request before the hang-up: %d %s", r.Status, r.Body)
	}
	delay(600000)
	impatient := &http.Client{Timeout: 700 * time.Millisecond}
	req, _ := http.NewRequest(http.MethodPost, g.URL+mm.path, strings.NewReader(mm.body))
	if resp, err := impatient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the held PD legs answered: %d", resp.StatusCode)
	}
	if got, want := pdCountAt(t, e.URLs[0], "encode", "ok"), 2; got != want {
		t.Fatalf("the encode worker encoded %d requests, want %d: the hang-up must come after the encode leg", got, want)
	}
	checkNoneInFlight(t, g, all...)
	for _, u := range all {
		if v, _ := Metric(t, g.MetricsURL, fmt.Sprintf(`smg_worker_cb_state{worker=%q}`, u)); v != 0 {
			t.Errorf("worker %s's breaker is %v after a client left it, want 0 (closed)", u, v)
		}
	}
}
