#!/usr/bin/env bash
# install-go-tool.sh NAME VERSION PACKAGE VERSION_FLAG [OUTDIR] — build the command PACKAGE
# (a Go import path, installed as NAME) at module VERSION with the plain `go` command into
# OUTDIR (default ~/.cache/smg-tools/NAME-VERSION). Prints the binary's path on its last line.
# hack/helm/build.sh and hack/promtool/build.sh call it.
#
# The tool is built outside this repository's module: `go install pkg@version` ignores
# go.mod, so the tool's dependencies never enter the project's go.mod or go.sum.
# Idempotent: when the binary and the version stamp are there it exits at once. Concurrent
# callers are serialised by a lock in OUTDIR (the second waits, then finds it cached).
# VERSION_FLAG is what makes the built binary print its version (logged once built).
# Env: LDFLAGS (extra -ldflags, e.g. a version stamp), FORCE (0), GO (go).
set -euo pipefail

if [ $# -lt 4 ] || [ $# -gt 5 ]; then
  echo "usage: install-go-tool.sh NAME VERSION PACKAGE VERSION_FLAG [OUTDIR]" >&2
  exit 2
fi
NAME=$1 VERSION=$2 PACKAGE=$3 VERSION_FLAG=$4
GO=${GO:-go}
OUT=${5:-$HOME/.cache/smg-tools/$NAME-$VERSION}

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
STAMP="$OUT/.build-stamp"
want="$NAME=$VERSION $($GO env GOVERSION)"

if command -v flock >/dev/null; then exec 9>"$OUT/.lock"; flock 9; fi

if [ "${FORCE:-0}" != 1 ] && [ -x "$OUT/$NAME" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
  echo "$NAME: cached in $OUT ($want)" >&2
  echo "$OUT/$NAME"
  exit 0
fi

rm -f "$STAMP"
t0=$(date +%s)
# GOFLAGS=-mod=mod: a GOFLAGS=-mod=vendor or readonly in the caller's environment must not
# reach a module-mode install; CGO off: a static binary that needs nothing from the machine.
CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" GOTOOLCHAIN=local GOBIN="$OUT" \
  $GO install -trimpath -ldflags "-s -w ${LDFLAGS:-}" "$PACKAGE@$VERSION"
echo "$want" > "$STAMP"
echo "$NAME: built $OUT/$NAME ($want) in $(( $(date +%s) - t0 )) s" >&2
"$OUT/$NAME" "$VERSION_FLAG" >&2 || true
echo "$OUT/$NAME"
