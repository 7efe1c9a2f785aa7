package mesh

import (
	"regexp"
	"strings"
	"testing"

	"github.com/smg-go/smg/internal/cli"
)

func parseFlags(t *testing.T, args ...string) (Config, error) {
	t.Helper()
	fs := cli.NewFlagSet("smg launch")
	var cfg Config
	RegisterFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

func TestFlagDefaults(t *testing.T) {
	cfg, err := parseFlags(t)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Enable || cfg.Host != "0.0.0.0" || cfg.Port != 39527 || cfg.AdvertiseHost != "" || len(cfg.PeerURLs) != 0 {
		t.Fatalf("defaults %+v", cfg)
	}
	if !regexp.MustCompile(`^Mesh_[A-Za-z0-9]{4}$`).MatchString(cfg.ServerName) {
		t.Fatalf("default name %q", cfg.ServerName)
	}
}

func TestFlagValidation(t *testing.T) {
	cases := []struct {
		args []string
		want string // substring of the error; "" means valid
	}{
		{[]string{"--enable-mesh", "--mesh-advertise-host", "10.0.0.1"}, ""},
		{[]string{"--enable-mesh", "--mesh-host", "10.0.0.1"}, ""},
		{[]string{"--enable-mesh"}, "mesh advertise address cannot be unspecified"},
		{[]string{"--enable-mesh", "--mesh-host", "::"}, "mesh advertise address cannot be unspecified"},
		{[]string{"--enable-mesh", "--mesh-advertise-host", "0.0.0.0"}, "mesh advertise address cannot be unspecified"},
		{[]string{"--enable-mesh", "--mesh-host", "10.0.0.1", "--mesh-port", "0"}, "mesh port cannot be 0"},
		{[]string{"--enable-mesh", "--mesh-host", "10.0.0.1", "--mesh-peer-urls", "smg-0.smg-mesh:39527"}, "Invalid mesh peer URL"},
		{[]string{"--enable-mesh", "--mesh-host", "10.0.0.1", "--mesh-peer-urls", "10.0.0.2"}, "Invalid mesh peer URL"},
		{[]string{"--enable-mesh", "--mesh-host", "10.0.0.1", "--mesh-peer-urls", "10.0.0.2:39527", "[fd00::2]:39527"}, ""},
		{[]string{"--enable-mesh", "--mesh-host", "10.0.0.1", "--mesh-server-name", ""}, "mesh server name cannot be empty"},
		{[]string{"--enable-mesh", "--mesh-host", "10.0.0.1", "--mesh-server-name", "a:b"}, "cannot contain ':'"},
		{[]string{"--enable-mesh", "--mesh-host", "localhost"}, "invalid --mesh-host"},
		{[]string{"--enable-mesh", "--mesh-host", "10.0.0.1", "--mesh-tls-cert", "c.pem"}, "all three or none"},
		{[]string{"--mesh-port", "0"}, ""}, // the mesh is off: nothing to check
	}
	for _, c := range cases {
		_, err := parseFlags(t, c.args...)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: unexpected error %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
}

func TestAddresses(t *testing.T) {
	cfg, err := parseFlags(t, "--enable-mesh", "--mesh-advertise-host", "10.0.0.1", "--mesh-port", "4000")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AdvertiseAddr() != "10.0.0.1:4000" || cfg.ListenAddr() != "0.0.0.0:4000" {
		t.Fatalf("%s %s", cfg.AdvertiseAddr(), cfg.ListenAddr())
	}
}

// FuzzParsePeerURL: a peer URL parses only as IP:port, never panics, and its canonical form
// parses to itself.
func FuzzParsePeerURL(f *testing.F) {
	for _, s := range []string{"10.0.0.1:39527", "[::1]:1", "host:1", "10.0.0.1", "1.2.3.4:0", " 1.2.3.4:5 ", "[fe80::1%eth0]:9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParsePeerURL(s)
		if err != nil {
			return
		}
		again, err := ParsePeerURL(a)
		if err != nil || again != a {
			t.Fatalf("canonical %q of %q reparses to %q, %v", a, s, again, err)
		}
	})
}
