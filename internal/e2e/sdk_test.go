package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/mockworker"
)

// sdkStops are the stop lists the SDK test cycles through: none, one inside a word, one
// spanning words, several, one that never occurs, one at the very start (an empty answer).
var sdkStops = [][]string{
	{}, {"sat on"}, {"mat"}, {" ran", "cat"}, {"zebra"}, {"t"}, {"off "}, {"a m", "zebra", "ran"}, {"the"},
}

// expectedAnswer is the mock's known answer cut before the first stop string that completes
// (OpenAI's stop: the matched string is not returned).
func expectedAnswer(stops []string) string {
	text := mockworker.AnswerText
	cut, end := len(text), len(text)+1
	for _, s := range stops {
		if i := strings.Index(text, s); i >= 0 && (i+len(s) < end || i+len(s) == end && i < cut) {
			cut, end = i, i+len(s)
		}
	}
	return text[:cut]
}

// The OpenAI Node SDK, streamed and not, gets the mock's known answer through a gRPC fleet of
// both dialects for 1,000 requests with mixed stop strings.
func TestOpenAINodeSDKThroughAGRPCFleet(t *testing.T) {
	dir := os.Getenv("SMG_OPENAI_NODE")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache/smg-openai-node/v1")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules/openai")); err != nil {
		t.Fatalf("the OpenAI Node SDK is missing (run bash hack/openai-node/fetch.sh, or make tools): %v", err)
	}
	urls := append(startGRPCMocks(t, 1, "sglang"), startGRPCMocks(t, 1, "vllm")...)
	g := StartGateway(t, append([]string{"--model-path", qwen3Dir(t), "--policy", "round_robin", "--worker-urls"}, urls...)...)
	stops, _ := json.Marshal(sdkStops)
	const n = 1000
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "testdata/openai_sdk.js", g.URL+"/v1", "qwen3", "1000", "16", string(stops))
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	seen := map[int]bool{}
	streamed := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r struct {
			I      int    `json:"i"`
			Stream bool   `json:"stream"`
			Text   string `json:"text"`
			Finish string `json:"finish"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("SDK output line %q: %v", sc.Text(), err)
		}
		stop := sdkStops[r.I%len(sdkStops)]
		if want := expectedAnswer(stop); r.Text != want || r.Finish != "stop" {
			t.Errorf("request %d (stream %v, stop %q): %q finish %q, want %q finish stop", r.I, r.Stream, stop, r.Text, r.Finish, want)
		}
		seen[r.I] = true
		if r.Stream {
			streamed++
		}
	}
	if len(seen) != n || streamed != n/2 {
		t.Fatalf("the SDK reported %d distinct requests (%d streamed), want %d (%d)", len(seen), streamed, n, n/2)
	}
	for _, u := range urls { // every request's in-flight slot came back
		testutil.Eventually(t, u+" idle at the gateway", func() bool { return workerOf(t, g, u).Load == 0 })
	}
}
