#!/usr/bin/env bash
# build.sh [OUTDIR] — build promtool from its Go module (github.com/prometheus/prometheus)
# into OUTDIR (default ~/.cache/smg-tools/promtool-$PROMTOOL_VERSION), for the alert-rule
# tests in deploy/ (promtool check rules, promtool test rules), with
# hack/install-go-tool.sh (outside the project's go.mod; cached; serialised). Prints the
# binary's path on its last line.
# Env: PROMTOOL_VERSION (v0.316.0, the Prometheus module's tag of Prometheus 3.x), FORCE (0),
# GO (go).
set -euo pipefail

PROMTOOL_VERSION=${PROMTOOL_VERSION:-v0.316.0}
exec bash "$(dirname "$0")/../install-go-tool.sh" promtool "$PROMTOOL_VERSION" \
  github.com/prometheus/prometheus/cmd/promtool --version "$@"
