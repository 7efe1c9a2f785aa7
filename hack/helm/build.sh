#!/usr/bin/env bash
# build.sh [OUTDIR] — build the helm CLI from its Go module (helm.sh/helm/v4) with the plain
# `go` command into OUTDIR (default ~/.cache/smg-tools/helm-$HELM_VERSION), for the chart
# tests in deploy/helm (helm template, helm lint). Prints the binary's path on its last line.
#
# helm is built as a tool outside this repository's module: `go install pkg@version` ignores
# go.mod, so helm's dependencies never enter the project's go.mod or go.sum.
# Idempotent: when the binary and the version stamp are there it exits at once. Concurrent
# callers are serialised by a lock in OUTDIR (the second waits, then finds it cached).
# Env: HELM_VERSION (v4.3.2), FORCE (0), GO (go).
set -euo pipefail

HELM_VERSION=${HELM_VERSION:-v4.3.2}
GO=${GO:-go}
OUT=${1:-$HOME/.cache/smg-tools/helm-$HELM_VERSION}

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
STAMP="$OUT/.build-stamp"
want="helm=$HELM_VERSION $($GO env GOVERSION)"

if command -v flock >/dev/null; then exec 9>"$OUT/.lock"; flock 9; fi

if [ "${FORCE:-0}" != 1 ] && [ -x "$OUT/helm" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
  echo "build.sh: cached in $OUT ($want)" >&2
  echo "$OUT/helm"
  exit 0
fi

rm -f "$STAMP"
t0=$(date +%s)
# GOFLAGS=-mod=mod: a GOFLAGS=-mod=vendor or readonly in the caller's environment must not
# reach a module-mode install; CGO off: a static binary that needs nothing from the machine.
# The version ldflag is what helm's own Makefile sets (otherwise `helm version` says v4.x-dev).
CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" GOTOOLCHAIN=local GOBIN="$OUT" \
  $GO install -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
  "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
echo "$want" > "$STAMP"
echo "build.sh: built $OUT/helm ($want) in $(( $(date +%s) - t0 )) s" >&2
"$OUT/helm" version >&2 || true
echo "$OUT/helm"
