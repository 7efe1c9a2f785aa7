#!/usr/bin/env bash
# tools.sh — the protobuf code generators `make proto` and engine's regeneration test run:
#   protoc              Debian's protobuf-compiler (apt-get, only when protoc is missing; the
#                       well-known types' .proto files come with it via libprotobuf-dev)
#   protoc-gen-go       google.golang.org/protobuf/cmd/protoc-gen-go    $PROTOC_GEN_GO_VERSION
#   protoc-gen-go-grpc  google.golang.org/grpc/cmd/protoc-gen-go-grpc   $PROTOC_GEN_GO_GRPC_VERSION
# The two plugins are built with `go install pkg@version` into $SMG_TOOLS_BIN (default
# ~/.cache/smg-tools/bin), outside this module (go.mod and go.sum do not change). A no-op
# when protoc is on PATH and both plugins report the pinned versions. Concurrent callers are
# serialised by a lock beside the binaries. Env: GO (go).
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
GO=${GO:-go}
BIN=${SMG_TOOLS_BIN:-$HOME/.cache/smg-tools/bin}

mkdir -p "$BIN"
if command -v flock >/dev/null; then exec 9>"$BIN/.proto-tools.lock"; flock 9; fi

if ! command -v protoc >/dev/null; then
  echo "tools.sh: protoc missing; installing Debian's protobuf-compiler" >&2
  command -v apt-get >/dev/null || { echo "tools.sh: no apt-get here; install protoc (protobuf-compiler) by hand" >&2; exit 1; }
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y protobuf-compiler >&2 ||
    { $sudo apt-get update >&2 && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y protobuf-compiler >&2; }
fi
# protoc reads google/protobuf/*.proto from its include directory; Debian ships them in
# libprotobuf-dev, which protobuf-compiler only recommends.
if [ ! -f /usr/include/google/protobuf/struct.proto ] && [ "$(command -v protoc)" = /usr/bin/protoc ]; then
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y libprotobuf-dev >&2
fi

# version PLUGIN: what the installed plugin says it is ("" when absent).
version() { [ -x "$BIN/$1" ] && "$BIN/$1" --version 2>/dev/null | awk '{print $NF}' || true; }

if [ "$(version protoc-gen-go)" != "$PROTOC_GEN_GO_VERSION" ]; then
  GOBIN=$BIN GOFLAGS= $GO install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
fi
if [ "$(version protoc-gen-go-grpc)" != "${PROTOC_GEN_GO_GRPC_VERSION#v}" ]; then
  GOBIN=$BIN GOFLAGS= $GO install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
fi
