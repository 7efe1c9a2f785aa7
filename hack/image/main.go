// Command image builds the gateway's container image without a container daemon: a static smg
// binary, the build machine's CA roots and a non-root user in one layer on an empty base,
// written as a docker-style tarball (what `crane push`, `docker load` and `podman load` read) and
// as an OCI image layout. Every timestamp is fixed, so two builds of one commit with one Go
// toolchain give the same image digest.
//
// The image is named after the Helm chart's default: values.yaml's image.repository, tagged
// with Chart.yaml's appVersion, so `helm install` without image settings runs what this built.
//
//	go run ./hack/image --out bin        # make image
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	cfg := DefaultConfig()
	flag.StringVar(&cfg.RepoRoot, "repo", cfg.RepoRoot, "the repository root (holds go.mod and deploy/helm/smg)")
	flag.StringVar(&cfg.OutDir, "out", cfg.OutDir, "directory for smg-image.tar and the OCI layout smg-oci/")
	flag.StringVar(&cfg.GOARCH, "arch", cfg.GOARCH, "the image's CPU architecture (GOARCH)")
	flag.StringVar(&cfg.CABundle, "ca-bundle", cfg.CABundle, "the PEM CA bundle copied into the image as /etc/ssl/certs/ca-certificates.crt")
	flag.Parse()
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(2)
	}
	res, err := Build(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("%s %s\n  tarball %s\n  layout  %s\n  binary  %s\n", res.Ref, res.Digest, res.Tarball, res.Layout, res.BinaryVersion)
	if want := "v" + res.AppVersion; res.BinaryVersion != want {
		fmt.Printf("  note: the binary reports %s, not %s: a release is built from the commit tagged %s\n", res.BinaryVersion, want, want)
	}
}
