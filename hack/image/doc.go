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
