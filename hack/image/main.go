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
