package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestImageIsReproducibleNonRootAndRuns builds the image twice, then reads it back as a
// container runtime would (from the tarball `crane push` sends, and from the OCI layout),
// unpacks its layers into an empty root and runs the entrypoint's --version there as the
// image's user.
func TestImageIsReproducibleNonRootAndRuns(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RepoRoot = filepath.Join("..", "..")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var results [2]Result
	for i := range results {
		cfg.OutDir = t.TempDir()
		res, err := Build(cfg)
		if err != nil {
			t.Fatal(err)
		}
		results[i] = res
	}
	first, second := results[0], results[1]
	if first.Digest != second.Digest {
		t.Fatalf("two builds of one tree gave digests %s and %s", first.Digest, second.Digest)
	}
	if a, b := fileSum(t, first.Tarball), fileSum(t, second.Tarball); a != b {
		t.Fatalf("two builds of one tree gave tarballs with sha256 %x and %x", a, b)
	}

	// The chart's rendered default (deploy/gateway-deployment.yaml, which internal/helmchart
	// keeps equal to `helm template`) pulls the image this built.
	manifest, err := os.ReadFile(filepath.Join(cfg.RepoRoot, "deploy", "gateway-deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `image: "` + first.Ref.String() + `"`; !strings.Contains(string(manifest), want) {
		t.Errorf("the chart's default gateway does not run the built image: no %s in deploy/gateway-deployment.yaml", want)
	}

	img, err := tarball.ImageFromPath(first.Tarball, &first.Ref)
	if err != nil {
		t.Fatalf("reading %s as image %s: %v", first.Tarball, first.Ref, err)
	}
	if d, err := img.Digest(); err != nil || d != first.Digest {
		t.Fatalf("the tarball's image has digest %s (%v), Build reported %s", d, err, first.Digest)
	}
	if d := layoutDigest(t, first.Layout); d != first.Digest {
		t.Fatalf("the OCI layout holds %s, Build reported %s", d, first.Digest)
	}

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("image user %q, want 65532:65532 (non-root)", cf.Config.User)
	}
	if len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/smg" {
		t.Errorf("entrypoint %q, want [/smg]", cf.Config.Entrypoint)
	}
	if cf.OS != "linux" || cf.Architecture != cfg.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, cfg.GOARCH)
	}
	epoch, err := sourceDateEpoch(cfg.RepoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if !cf.Created.Time.Equal(epoch) {
		t.Errorf("image created %s, want the commit time %s", cf.Created.Time, epoch)
	}

	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil { // the image's user must reach /smg
		t.Fatal(err)
	}
	unpack(t, img, root, epoch)
	ca, err := os.ReadFile(cfg.CABundle)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(root, CAPath)); err != nil || !bytes.Equal(got, ca) {
		t.Errorf("%s in the image is not the build machine's CA bundle (err %v)", CAPath, err)
	}
	if passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd")); err != nil || !strings.Contains(string(passwd), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd lacks the nonroot user 65532: %q (%v)", passwd, err)
	}

	// The entrypoint runs alone in the image's root as the image's user when the test may
	// chroot (root, as in CI); otherwise from the unpacked root as this user.
	cmd := exec.Command(filepath.Join(root, "smg"), "--version")
	if os.Geteuid() == 0 {
		cmd = exec.Command("/smg", "--version")
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: NonRootUID, Gid: NonRootUID}}
		cmd.Dir = "/"
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the image's /smg --version: %v\n%s", err, out)
	}
	want := "smg " + cf.Config.Labels["org.opencontainers.image.version"] + " (commit " + cf.Config.Labels["org.opencontainers.image.revision"] + ", "
	if !strings.HasPrefix(string(out), want) {
		t.Fatalf("the image's /smg --version printed %q, want a line starting %q (the image's labels)", out, want)
	}
}

// TestValidateSaysWhatToFix: each refused setting names the flag or the remedy.
func TestValidateSaysWhatToFix(t *testing.T) {
	base := DefaultConfig()
	base.RepoRoot = filepath.Join("..", "..")
	for _, tc := range []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.RepoRoot = t.TempDir() }, "--repo"},
		{func(c *Config) { c.OutDir = "" }, "--out"},
		{func(c *Config) { c.GOARCH = "" }, "--arch"},
		{func(c *Config) { c.CABundle = filepath.Join(t.TempDir(), "none.pem") }, "--ca-bundle"},
	} {
		c := base
		tc.mutate(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want an error naming %s", err, tc.want)
		}
	}
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func layoutDigest(t *testing.T, dir string) v1.Hash {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("reading the OCI layout %s: %v", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("the OCI layout lists %d images, want 1", len(m.Manifests))
	}
	return m.Manifests[0].Digest
}

// unpack writes the image's flattened file system under root, checking that every entry
// carries the fixed time and that no path leaves root.
func unpack(t *testing.T, img v1.Image, root string, epoch time.Time) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(epoch) {
			t.Errorf("%s has time %s, want the fixed %s", h.Name, h.ModTime, epoch)
		}
		p := filepath.Join(root, h.Name)
		if !strings.HasPrefix(p, root+string(filepath.Separator)) {
			t.Fatalf("layer entry %q leaves the root", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, os.FileMode(h.Mode).Perm()|modeBits(h.Mode)); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode).Perm())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("unexpected layer entry %q of type %c", h.Name, h.Typeflag)
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// modeBits carries the sticky bit of /tmp over from a tar mode.
func modeBits(mode int64) os.FileMode {
	if mode&0o1000 != 0 {
		return os.ModeSticky
	}
	return 0
}
