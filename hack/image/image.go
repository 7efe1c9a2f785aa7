package main

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"sigs.k8s.io/yaml"
)

// The image's fixed facts.
const (
	// NonRootUID is the user (and group) the entrypoint runs as: distroless' "nonroot", the
	// chart's podSecurityContext.runAsUser.
	NonRootUID = 65532
	// Entrypoint is where the gateway binary lives in the image.
	Entrypoint = "/smg"
	// CAPath is where Go's crypto/x509 looks first for the system roots on Linux.
	CAPath = "/etc/ssl/certs/ca-certificates.crt"
	// TarballName and LayoutName are the outputs under Config.OutDir.
	TarballName = "smg-image.tar"
	LayoutName  = "smg-oci"
)

// Config says what to build and where.
type Config struct {
	// RepoRoot is the repository root: the module to build and the chart to name the image after.
	RepoRoot string
	// OutDir receives TarballName and LayoutName (replaced when present).
	OutDir string
	// GOARCH is the image's architecture; the binary is cross-compiled for linux/GOARCH.
	GOARCH string
	// CABundle is the PEM bundle of CA roots copied into the image at CAPath.
	CABundle string
	// Go is the go command that builds the binary.
	Go string
}

// DefaultConfig builds for this machine's architecture from the current directory into bin/.
func DefaultConfig() Config {
	return Config{RepoRoot: ".", OutDir: "bin", GOARCH: runtime.GOARCH, CABundle: "/etc/ssl/certs/ca-certificates.crt", Go: "go"}
}

// Validate reports a setting that cannot work, with what to do about it.
func (c Config) Validate() error {
	if _, err := os.Stat(filepath.Join(c.RepoRoot, "go.mod")); err != nil {
		return fmt.Errorf("repository root %q has no go.mod: run from the repository root or pass --repo", c.RepoRoot)
	}
	if c.OutDir == "" {
		return errors.New("--out is empty: pass the directory for the image files (make image uses bin)")
	}
	if c.GOARCH == "" {
		return errors.New("--arch is empty: pass a GOARCH such as amd64 or arm64")
	}
	if _, err := os.Stat(c.CABundle); err != nil {
		return fmt.Errorf("CA bundle %q: %v (install the ca-certificates package or pass --ca-bundle)", c.CABundle, err)
	}
	return nil
}

// Result is what Build wrote.
type Result struct {
	Ref           name.Tag
	Digest        v1.Hash
	Tarball       string
	Layout        string
	AppVersion    string // the chart's appVersion, the image's tag
	BinaryVersion string // what the binary's --version reports as its version
	Commit        string
}

// Build compiles the gateway, assembles the image and writes it as a tarball and an OCI layout.
func Build(cfg Config) (Result, error) {
	repo, appVersion, err := chartImage(cfg.RepoRoot)
	if err != nil {
		return Result{}, err
	}
	ref, err := name.NewTag(repo + ":" + appVersion)
	if err != nil {
		return Result{}, fmt.Errorf("the chart's image %s:%s is not a valid reference: fix image.repository in values.yaml or appVersion in Chart.yaml: %v", repo, appVersion, err)
	}
	epoch, err := sourceDateEpoch(cfg.RepoRoot)
	if err != nil {
		return Result{}, err
	}
	work, err := os.MkdirTemp("", "smg-image-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(work)
	bin := filepath.Join(work, "smg")
	if err := buildBinary(cfg, bin); err != nil {
		return Result{}, err
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return Result{}, fmt.Errorf("reading the build information of the built binary: %v", err)
	}
	commit := setting(info, "vcs.revision")
	if setting(info, "vcs.modified") == "true" {
		commit += "-dirty"
	}
	img, err := assemble(cfg, bin, epoch, map[string]string{
		"org.opencontainers.image.title":    "smg",
		"org.opencontainers.image.version":  info.Main.Version,
		"org.opencontainers.image.revision": commit,
		"org.opencontainers.image.source":   "https://github.com/smg-go/smg",
	})
	if err != nil {
		return Result{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return Result{}, err
	}
	res := Result{Ref: ref, Digest: digest, AppVersion: appVersion, BinaryVersion: info.Main.Version, Commit: commit,
		Tarball: filepath.Join(cfg.OutDir, TarballName), Layout: filepath.Join(cfg.OutDir, LayoutName)}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return Result{}, err
	}
	if err := tarball.WriteToFile(res.Tarball, ref, img); err != nil {
		return Result{}, fmt.Errorf("writing %s: %v", res.Tarball, err)
	}
	if err := os.RemoveAll(res.Layout); err != nil {
		return Result{}, err
	}
	lp, err := layout.Write(res.Layout, empty.Index)
	if err != nil {
		return Result{}, fmt.Errorf("writing %s: %v", res.Layout, err)
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref.String()})); err != nil {
		return Result{}, fmt.Errorf("writing %s: %v", res.Layout, err)
	}
	return res, nil
}

// buildBinary compiles a static, path-free, VCS-stamped smg for linux/GOARCH into out.
func buildBinary(cfg Config, out string) error {
	cmd := exec.Command(cfg.Go, "build", "-trimpath", "-buildvcs=true", "-ldflags=-s -w", "-o", out, "./cmd/smg")
	cmd.Dir = cfg.RepoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+cfg.GOARCH, "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/smg: %v\n%s", err, b)
	}
	return requireStatic(out)
}

// requireStatic refuses a binary that needs a dynamic loader: the image has none.
func requireStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not an ELF binary: %v", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked: the image has no loader or libc; build with CGO_ENABLED=0", path)
		}
	}
	return nil
}

// assemble puts the binary, the CA roots and the user database in one layer on an empty base
// and sets the runtime configuration; every time in it is epoch. The media types are Docker's
// schema 2, which every registry and runtime reads and which a docker-style tarball keeps:
// the image pushed from the tarball has the digest Build reports.
func assemble(cfg Config, bin string, epoch time.Time, labels map[string]string) (v1.Image, error) {
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(cfg.CABundle)
	if err != nil {
		return nil, err
	}
	files, err := rootfs(binary, ca, epoch)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(files)), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: epoch}, CreatedBy: "hack/image: smg, CA roots, user nonroot", Comment: "go build -trimpath, CGO_ENABLED=0",
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", cfg.GOARCH, v1.Time{Time: epoch}
	user := strconv.Itoa(NonRootUID)
	cf.Config = v1.Config{
		Entrypoint:   []string{Entrypoint},
		User:         user + ":" + user,
		WorkingDir:   "/",
		Env:          []string{"SSL_CERT_FILE=" + CAPath},
		ExposedPorts: map[string]struct{}{"30000/tcp": {}, "29000/tcp": {}},
		Labels:       labels,
	}
	return mutate.ConfigFile(img, cf)
}

// rootfs is the layer's tar: directories first, then files, owned by root (the binary is not
// writable by the user it runs as), with one fixed time.
func rootfs(binary, ca []byte, epoch time.Time) ([]byte, error) {
	uid := strconv.Itoa(NonRootUID)
	passwd := "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:" + uid + ":" + uid + ":nonroot:/home/nonroot:/sbin/nologin\n"
	group := "root:x:0:\nnonroot:x:" + uid + ":\n"
	entries := []struct {
		name string
		mode int64
		uid  int
		body []byte // nil: a directory
	}{
		{"etc/", 0o755, 0, nil},
		{"etc/ssl/", 0o755, 0, nil},
		{"etc/ssl/certs/", 0o755, 0, nil},
		{"home/", 0o755, 0, nil},
		{"home/nonroot/", 0o700, NonRootUID, nil},
		{"tmp/", 0o1777, 0, nil},
		{"etc/passwd", 0o644, 0, []byte(passwd)},
		{"etc/group", 0o644, 0, []byte(group)},
		{strings.TrimPrefix(CAPath, "/"), 0o644, 0, ca},
		{strings.TrimPrefix(Entrypoint, "/"), 0o755, 0, binary},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: epoch, Format: tar.FormatPAX}
		if e.body == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// chartImage returns the chart's default image: values.yaml's image.repository and
// Chart.yaml's appVersion (the tag the chart uses when image.tag is empty).
func chartImage(root string) (repo, appVersion string, err error) {
	chart := filepath.Join(root, "deploy", "helm", "smg")
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	var v struct {
		Image struct {
			Repository string `json:"repository"`
		} `json:"image"`
	}
	for file, into := range map[string]any{"Chart.yaml": &c, "values.yaml": &v} {
		b, err := os.ReadFile(filepath.Join(chart, file))
		if err != nil {
			return "", "", err
		}
		if err := yaml.Unmarshal(b, into); err != nil {
			return "", "", fmt.Errorf("%s: %v", filepath.Join(chart, file), err)
		}
	}
	if c.AppVersion == "" || v.Image.Repository == "" {
		return "", "", fmt.Errorf("%s: Chart.yaml needs appVersion and values.yaml image.repository: the image is named after them", chart)
	}
	return v.Image.Repository, c.AppVersion, nil
}

// sourceDateEpoch is the time stamped on every file and on the image: $SOURCE_DATE_EPOCH when
// set (the reproducible-builds convention), else the commit time of HEAD, so that the
// image's "created" means something and still does not change from build to build.
func sourceDateEpoch(root string) (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		cmd := exec.Command("git", "log", "-1", "--format=%ct")
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			return time.Time{}, fmt.Errorf("git log (the commit time stamps the image): %v; set SOURCE_DATE_EPOCH outside a git checkout", err)
		}
		s = strings.TrimSpace(string(out))
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q is not a count of seconds: %v", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func setting(info *buildinfo.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return "unknown"
}
