package cli

import (
	"bytes"
	"errors"
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"
)

func newStdSet(out *bytes.Buffer) (*flag.FlagSet, *time.Duration, *int, *bool) {
	fs := flag.NewFlagSet("loadgen run", flag.ContinueOnError)
	fs.SetOutput(out)
	d := fs.Duration("duration", 0, "stop after this long")
	n := fs.Int("num-requests", 10, "requests")
	b := fs.Bool("stream", false, "stream")
	fs.Func("workload", "random|raw", func(v string) error {
		if v != "random" && v != "raw" {
			return errors.New("use one of [random raw]")
		}
		return nil
	})
	return fs, d, n, b
}

func TestParseStd(t *testing.T) {
	var out bytes.Buffer
	fs, d, n, b := newStdSet(&out)
	pos, err := ParseStd(fs, strings.Fields("a.json --duration 5s -num-requests=3 b.json --stream --workload raw -- --c"))
	if err != nil || *d != 5*time.Second || *n != 3 || !*b || !reflect.DeepEqual(pos, []string{"a.json", "b.json", "--c"}) {
		t.Fatalf("err %v d %v n %d b %v pos %q", err, *d, *n, *b, pos)
	}
	for _, tc := range []struct{ args, want string }{
		{"--duration 5", `invalid value "5" for --duration: give a duration with its unit, such as 5s, 1m30s or 500ms`},
		{"--num-requests many", `invalid value "many" for --num-requests: give an integer such as 10`},
		{"--stream=maybe", `invalid value "maybe" for --stream: give true or false`},
		{"--workload chat", `invalid value "chat" for --workload: use one of [random raw]`},
		{"--duraton 5s", "unknown flag --duraton; did you mean --duration? (run 'loadgen run --help' to list flags)"},
		{"--duration", "flag --duration needs a value: a duration"},
		{"--workload --stream", "flag --workload needs a value"},
	} {
		out.Reset()
		fs, _, _, _ := newStdSet(&out)
		_, err := ParseStd(fs, strings.Fields(tc.args))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.args, err, tc.want)
		}
		if out.Len() != 0 {
			t.Errorf("%s: an error must not print the usage:\n%s", tc.args, out.String())
		}
	}
	out.Reset()
	fs, _, _, _ = newStdSet(&out)
	if _, err := ParseStd(fs, []string{"-h"}); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "-num-requests") {
		t.Fatalf("help: %v %q", err, out.String())
	}
}

func FuzzParseStd(f *testing.F) {
	f.Add("--duration 5s -num-requests=3 x --stream")
	f.Add("-- --duration=1 -h=2 --=")
	f.Fuzz(func(t *testing.T, line string) {
		var out bytes.Buffer
		fs, _, _, _ := newStdSet(&out)
		fs.Usage = func() {}
		args := strings.Fields(line)
		pos, err := ParseStd(fs, args)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		// The positional arguments are the input's, in order.
		j := 0
		for _, a := range args {
			if j < len(pos) && a == pos[j] {
				j++
			}
		}
		if j != len(pos) {
			t.Fatalf("positional %q is not a subsequence of %q", pos, args)
		}
	})
}
