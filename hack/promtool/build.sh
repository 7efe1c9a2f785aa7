#!/usr/bin/env bash
# build.sh [OUTDIR] — build promtool from its Go module (github.com/prometheus/prometheus)
# with the plain `go` command into OUTDIR (default ~/.cache/smg-tools/promtool-$PROMTOOL_VERSION),
# for the alert-rule tests in deploy/ (promtool check rules, promtool test rules). Prints the
# binary's path on its last line.
#
# promtool is built as a tool outside this repository's module: `go install pkg@version`
# ignores go.mod, so Prometheus's dependencies never enter the project's go.mod or go.sum.
# Idempotent: when the binary and the version stamp are there it exits at once. Concurrent
# callers are serialised by a lock in OUTDIR (the second waits, then finds it cached).
# Env: PROMTOOL_VERSION (v0.316.0, the Prometheus module's tag of Prometheus 3.x), FORCE (0), GO (go).
set -euo pipefail

PROMTOOL_VERSION=${PROMTOOL_VERSION:-v0.316.0}
GO=${GO:-go}
OUT=${1:-$HOME/.cache/smg-tools/promtool-$PROMTOOL_VERSION}

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
STAMP="$OUT/.build-stamp"
want="promtool=$PROMTOOL_VERSION $($GO env GOVERSION)"

if command -v flock >/dev/null; then exec 9>"$OUT/.lock"; flock 9; fi

if [ "${FORCE:-0}" != 1 ] && [ -x "$OUT/promtool" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
  echo "build.sh: cached in $OUT ($want)" >&2
  echo "$OUT/promtool"
  exit 0
fi

rm -f "$STAMP"
t0=$(date +%s)
# GOFLAGS=-mod=mod: a GOFLAGS=-mod=vendor or readonly in the caller's environment must not
# reach a module-mode install; CGO off: a static binary that needs nothing from the machine.
CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" GOTOOLCHAIN=local GOBIN="$OUT" \
  $GO install -trimpath -ldflags "-s -w" \
  "github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_VERSION"
echo "$want" > "$STAMP"
echo "build.sh: built $OUT/promtool ($want) in $(( $(date +%s) - t0 )) s" >&2
"$OUT/promtool" --version >&2 || true
echo "$OUT/promtool"
