package cli

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

type opts struct {
	host    string
	port    int
	ratio   float64
	json    bool
	urls    []string
	policy  string
	timeout time.Duration
}

func newSet(o *opts) *FlagSet {
	fs := NewFlagSet("smg launch")
	fs.String("host", &o.host, "0.0.0.0", "bind address")
	fs.Int("port", &o.port, 30000, "port")
	fs.Float("ratio", &o.ratio, 1.5, "ratio")
	fs.Bool("log-json", &o.json, false, "json logs")
	fs.StringList("worker-urls", &o.urls, "worker URLs")
	fs.Enum("policy", &o.policy, "round_robin", []string{"round_robin", "random"}, "policy")
	fs.Duration("request-timeout-secs", &o.timeout, 1800*time.Second, "timeout")
	fs.Alias("worker-url", "worker-urls")
	return fs
}

func TestParseSpecCommandLines(t *testing.T) {
	var o opts
	fs := newSet(&o)
	err := fs.Parse(strings.Fields("--worker-urls http://w1:8000 http://w2:8000 --port=8080 --log-json --ratio -2.5 --worker-url w3:1 --policy random --request-timeout-secs 0.5"))
	if err != nil {
		t.Fatal(err)
	}
	want := opts{host: "0.0.0.0", port: 8080, ratio: -2.5, json: true, urls: []string{"http://w1:8000", "http://w2:8000", "w3:1"}, policy: "random", timeout: 500 * time.Millisecond}
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("got %+v want %+v", o, want)
	}
	if !fs.IsSet("port") || fs.IsSet("host") {
		t.Fatal("IsSet wrong")
	}
}

func TestParseErrorsNameTheFlag(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"--port abc", `invalid value "abc" for --port: not an integer; give an integer such as 30000`},
		{"--port", "flag --port needs a value"},
		{"--prot 1", "unknown flag --prot; did you mean --port?"},
		{"--policy cache", `invalid value "cache" for --policy: not a valid choice; give one of round_robin, random`},
		{"--worker-urls --port 1", "flag --worker-urls needs one or more values"},
		{"stray", `unexpected argument "stray"`},
		{"--log-json=maybe", `invalid value "maybe" for --log-json`},
		{"--request-timeout-secs -1", "--request-timeout-secs"},
	} {
		var o opts
		err := newSet(&o).Parse(strings.Fields(tc.args))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}

func TestBoolFalse(t *testing.T) {
	o := opts{}
	fs := newSet(&o)
	if err := fs.Parse([]string{"--log-json", "--log-json=false"}); err != nil || o.json {
		t.Fatalf("err=%v json=%v", err, o.json)
	}
}

func TestMarkdownListsEveryFlag(t *testing.T) {
	var o opts
	md := newSet(&o).Markdown()
	for _, name := range []string{"`--host`", "`--worker-urls`, `--worker-url`", "`1800`"} {
		if !strings.Contains(md, name) {
			t.Errorf("markdown lacks %s:\n%s", name, md)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("--worker-urls http://w1:8000 http://w2:8000 --port 1")
	f.Add("--port=-1 --log-json=true --ratio .5")
	f.Add("-- - --= --policy=")
	f.Fuzz(func(t *testing.T, line string) {
		var o opts
		fs := newSet(&o)
		args := strings.Fields(line)
		if err := fs.Parse(args); err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		// A successful parse leaves every value within its flag's domain.
		if o.policy != "round_robin" && o.policy != "random" {
			t.Fatalf("policy %q accepted from %q", o.policy, line)
		}
		if o.timeout < 0 {
			t.Fatalf("negative timeout accepted from %q", line)
		}
	})
}

func TestOccurrencesKeepEachGroupTogether(t *testing.T) {
	var groups [][]string
	var urls []string
	fs := NewFlagSet("smg launch")
	fs.Occurrences("prefill", 1, 2, "URL [BOOTSTRAP_PORT|none]", "prefill workers", func(w []string) error {
		groups = append(groups, w)
		return nil
	})
	fs.StringList("decode", &urls, "decode workers")
	err := fs.Parse(strings.Fields("--prefill http://p1:8000 9001 --decode http://d1:8000 --prefill=http://p2:8000 none --prefill http://p3:8000 --decode http://d2:8000"))
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"http://p1:8000", "9001"}, {"http://p2:8000", "none"}, {"http://p3:8000"}}
	if !reflect.DeepEqual(groups, want) || !reflect.DeepEqual(urls, []string{"http://d1:8000", "http://d2:8000"}) {
		t.Fatalf("groups %q urls %q", groups, urls)
	}
	for _, args := range []string{"--prefill", "--prefill a b c", "--prefill --decode x"} {
		err := fs.Parse(strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), "--prefill takes URL [BOOTSTRAP_PORT|none]") {
			t.Errorf("%q: %v", args, err)
		}
	}
}

func TestNegationRefusalAndHint(t *testing.T) {
	var remove bool
	fs := NewFlagSet("smg launch")
	fs.Bool("remove-unhealthy-workers", &remove, true, "remove failed workers")
	fs.Negation("no-remove-unhealthy-workers", "remove-unhealthy-workers")
	fs.Refuse("data-parallel-size", "smg serve's flag; start the engines yourself")
	fs.UnknownHint = func(name string) string {
		if name == "router-x" {
			return "use --x"
		}
		return ""
	}
	if err := fs.Parse([]string{"--no-remove-unhealthy-workers"}); err != nil || remove || !fs.IsSet("remove-unhealthy-workers") {
		t.Fatalf("negation: err %v remove %v", err, remove)
	}
	for _, tc := range []struct{ args, want string }{
		{"--no-remove-unhealthy-workers=true", "takes no value: give --remove-unhealthy-workers=true instead"},
		{"--data-parallel-size 2", "--data-parallel-size: smg serve's flag; start the engines yourself"},
		{"--router-x 1", "unknown flag --router-x: use --x"},
		{"--data-parallel", "unknown flag --data-parallel (run"}, // refused flags are never suggested
	} {
		if err := fs.Parse(strings.Fields(tc.args)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.args, err, tc.want)
		}
	}
	if fs.Lookup("data-parallel-size") != nil || fs.Lookup("remove-unhealthy-workers") == nil {
		t.Fatal("Lookup must skip refused flags")
	}
	help, md := fs.Help(), fs.Markdown()
	if strings.Contains(help+md, "data-parallel-size") || !strings.Contains(help, "--no-remove-unhealthy-workers") {
		t.Fatalf("help must list the negation and hide the refused flag:\n%s\n%s", help, md)
	}
}

func TestHelpLayout(t *testing.T) {
	var o opts
	fs := newSet(&o)
	fs.Flags()[1].WithMetavar("PORT")
	var long string
	fs.String("a-rather-long-flag-name-for-the-column", &long, "x", "long one")
	fs.Alias("another-long-name", "a-rather-long-flag-name-for-the-column")
	help := fs.Help()
	for _, want := range []string{
		"--port PORT ", "--host TEXT ", "--ratio NUM ", "--request-timeout-secs SECS ", "--worker-urls, --worker-url VALUE... ", "--policy NAME ",
		// A names column wider than the column puts the description on the next line.
		"  --a-rather-long-flag-name-for-the-column, --another-long-name TEXT\n" + strings.Repeat(" ", 2+helpColumn+1) + "long one (default x)\n",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
	lines := strings.Split(help, "\n")
	for i, line := range lines {
		if strings.Contains(line, " V ") || strings.HasSuffix(line, " V") || strings.Contains(line, "(default false)") {
			t.Errorf("bare V or noise in %q", line)
		}
		// A names line either fits the column or stands alone, its description below.
		if strings.HasPrefix(line, "  --") && len(line) > 2+helpColumn && line[2+helpColumn] != ' ' &&
			(i+1 == len(lines) || !strings.HasPrefix(lines[i+1], strings.Repeat(" ", 2+helpColumn+1))) {
			t.Errorf("names spill into the description column: %q", line)
		}
	}
}

// TestUnknownFlagSuggestsTheClosestNames: a typo one edit away suggests that name alone, not
// every name two edits away too; a name held by a longer one suggests the longer ones; a
// name like none suggests nothing.
func TestUnknownFlagSuggestsTheClosestNames(t *testing.T) {
	known := []string{"count", "host", "port", "request-rate", "max-rate", "dialect"}
	for _, tc := range []struct{ name, want string }{
		{"cout", "unknown flag --cout; did you mean --count? ("},
		{"prot", "unknown flag --prot; did you mean --port? ("},
		{"rate", "unknown flag --rate; did you mean --max-rate or --request-rate? ("},
		{"dialekt", "unknown flag --dialekt; did you mean --dialect? ("},
		{"zzzzzz", "unknown flag --zzzzzz (run 'tool --help' to list flags)"},
	} {
		if got := UnknownFlagError("tool", tc.name, known).Error(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("--%s: %q, want it to start with %q", tc.name, got, tc.want)
		}
	}
}
