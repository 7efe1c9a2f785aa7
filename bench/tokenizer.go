package bench

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/smg-go/smg/tokenizer"
)

// TokenizerConfig configures the tokenizer suite: encode throughput per CPU-second of our
// tokenizer against Hugging Face tokenizers (its Node binding over the Rust library), on the
// same prompts, measured alternately in one run. Start from DefaultTokenizerConfig.
type TokenizerConfig struct {
	// DataDir holds the model directories and the Node binding (hack/tokenizer/fetch.sh).
	// Default $SMG_TOKENIZER_DATA, else ~/.cache/smg-tokenizers/v1.
	DataDir string
	// ModuleDir is the module root: the goldens the prompts are cut from and the reference
	// script are read from it. Default ".".
	ModuleDir string
	// Families are the model directories measured. Default qwen3 and llama3.
	Families []string
	// PromptBytes are the prompt sizes; each row's prompts are cut from the golden corpus,
	// texts joined in order until a prompt reaches its size. Default 4 KB and 100 KB.
	PromptBytes []int
	// Measure is how long each side encodes per row (CPU time). Default 3 s.
	Measure time.Duration
	// Node is the node command. Default "node".
	Node string
}

// DefaultTokenizerConfig returns the tokenizer suite's defaults (each field says its own).
func DefaultTokenizerConfig() TokenizerConfig {
	dir := os.Getenv("SMG_TOKENIZER_DATA")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "smg-tokenizers", "v1")
	}
	return TokenizerConfig{
		DataDir: dir, ModuleDir: ".", Families: []string{"qwen3", "llama3"},
		PromptBytes: []int{4 << 10, 100 << 10}, Measure: 3 * time.Second, Node: "node",
	}
}

// Validate reports configuration errors, each saying how to fix it.
func (c TokenizerConfig) Validate() error {
	if c.DataDir == "" || c.ModuleDir == "" || c.Node == "" || len(c.Families) == 0 || len(c.PromptBytes) == 0 || c.Measure <= 0 {
		return fmt.Errorf("tokenizer suite: data dir %q, module dir %q, node %q, %d families, %d sizes, measure %v: give each (start from bench.DefaultTokenizerConfig())",
			c.DataDir, c.ModuleDir, c.Node, len(c.Families), len(c.PromptBytes), c.Measure)
	}
	return nil
}

// TokenizerRow is one family and prompt size, both sides on the same prompts.
type TokenizerRow struct {
	Family      string  `json:"family"`
	PromptBytes int     `json:"prompt_bytes"`
	Prompts     int     `json:"prompts"`
	OursMBPerS  float64 `json:"ours_mb_per_cpu_second"`
	HFMBPerS    float64 `json:"hf_mb_per_cpu_second"`
	HFMode      string  `json:"hf_mode"` // the binding's faster way: one encode per call or encodeBatch
	Ratio       float64 `json:"ratio"`   // ours / Hugging Face's
	// AllocsPerEncode is heap allocations per Encode call, counted as testing.AllocsPerRun
	// counts them (allocsPerEncode): a steady state shows as 0.
	AllocsPerEncode float64 `json:"allocs_per_encode"`
}

// Tokenizer runs the suite. Each row measures Hugging Face first, then ours, on one core's
// worth of work each (both single-threaded callers), so the ratio is of one run.
func Tokenizer(cfg TokenizerConfig) ([]TokenizerRow, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "smgbench-tokenizer")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var rows []TokenizerRow
	for _, fam := range cfg.Families {
		tok, err := tokenizer.Load(filepath.Join(cfg.DataDir, fam))
		if err != nil {
			return rows, fmt.Errorf("tokenizer suite: %w (run make tools)", err)
		}
		texts, err := goldenTexts(filepath.Join(cfg.ModuleDir, "tokenizer", "testdata", "golden", fam+".jsonl.gz"))
		if err != nil {
			return rows, err
		}
		for _, size := range cfg.PromptBytes {
			prompts := cutPrompts(texts, size)
			file := filepath.Join(tmp, fmt.Sprintf("%s-%d.jsonl", fam, size))
			if err := writeJSONLines(file, prompts); err != nil {
				return rows, err
			}
			hf, mode, err := hfThroughput(cfg, fam, file)
			if err != nil {
				return rows, err
			}
			ours, allocs := encodeThroughput(tok, prompts, cfg.Measure), allocsPerEncode(tok, prompts)
			rows = append(rows, TokenizerRow{
				Family: fam, PromptBytes: size, Prompts: len(prompts), OursMBPerS: ours, HFMBPerS: hf,
				HFMode: mode, Ratio: ours / hf, AllocsPerEncode: allocs,
			})
		}
	}
	return rows, nil
}

// goldenTexts reads the "text" of every line of a golden file.
func goldenTexts(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open the golden corpus: %w", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	var texts []string
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var line struct{ Text string }
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		texts = append(texts, line.Text)
	}
	return texts, sc.Err()
}

// cutPrompts joins the texts in order into prompts of at least size bytes, up to 1 MiB of
// prompts in all (at least two), so every row encodes a similar amount per pass.
func cutPrompts(texts []string, size int) []string {
	want := max(2, (1<<20)/size)
	var prompts []string
	var cur bytes.Buffer
	for i := 0; len(prompts) < want; i++ {
		cur.WriteString(texts[i%len(texts)])
		if cur.Len() >= size {
			prompts = append(prompts, cur.String())
			cur.Reset()
		}
	}
	return prompts
}

func writeJSONLines(path string, lines []string) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// hfThroughput runs hack/tokenizer/hfbench.js on the prompts file.
func hfThroughput(cfg TokenizerConfig, fam, prompts string) (mbPerS float64, mode string, err error) {
	script := filepath.Join(cfg.ModuleDir, "hack", "tokenizer", "hfbench.js")
	cmd := exec.Command(cfg.Node, script, filepath.Join(cfg.DataDir, fam, "tokenizer.json"), prompts,
		fmt.Sprint(cfg.Measure.Seconds()))
	cmd.Env = append(os.Environ(), "SMG_TOKENIZER_DATA="+cfg.DataDir)
	out, err := cmd.Output()
	if err != nil {
		return 0, "", fmt.Errorf("tokenizer suite: %s: %w (run make tools; is node installed?)", script, err)
	}
	var r struct {
		Mode  string  `json:"mode"`
		MBPer float64 `json:"mb_per_cpu_second"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.MBPer <= 0 {
		return 0, "", fmt.Errorf("tokenizer suite: %s printed %q", script, out)
	}
	return r.MBPer, r.Mode, nil
}

// encodeThroughput encodes the prompts over and over for at least measure of this process's
// CPU time (after one warm pass) and returns MB per CPU-second.
func encodeThroughput(tok *tokenizer.Tokenizer, prompts []string, measure time.Duration) (mbPerS float64) {
	var buf []uint32
	pass := func() int {
		n := 0
		for _, p := range prompts {
			buf = tok.Encode(buf[:0], p, false)
			n += len(p)
		}
		return n
	}
	pass()
	start := cpuTime()
	bytes := 0
	for cpuTime()-start < measure {
		bytes += pass()
	}
	return float64(bytes) / 1e6 / (cpuTime() - start).Seconds()
}

// allocsPerEncode returns the heap allocations of one Encode as testing.AllocsPerRun counts
// them (GOMAXPROCS 1, the process's Mallocs around a pass over the prompts), the least of
// three passes after a warm one: an allocation of Encode's shows in every pass, another
// goroutine's in one at most.
func allocsPerEncode(tok *tokenizer.Tokenizer, prompts []string) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var buf []uint32
	least := -1.0
	for i := range 4 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for _, p := range prompts {
			buf = tok.Encode(buf[:0], p, false)
		}
		runtime.ReadMemStats(&after)
		if n := float64(after.Mallocs-before.Mallocs) / float64(len(prompts)); i > 0 && (least < 0 || n < least) {
			least = n
		}
	}
	return least
}

// cpuTime is this process's user + system CPU time.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
