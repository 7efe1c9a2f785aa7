#!/usr/bin/env bash
# build.sh [OUTDIR] — build the helm CLI from its Go module (helm.sh/helm/v4) into OUTDIR
# (default ~/.cache/smg-tools/helm-$HELM_VERSION), for the chart tests in deploy/helm (helm
# template, helm lint), with hack/install-go-tool.sh (outside the project's go.mod; cached;
# serialised). Prints the binary's path on its last line.
# Env: HELM_VERSION (v4.3.2), FORCE (0), GO (go).
set -euo pipefail

HELM_VERSION=${HELM_VERSION:-v4.3.2}
# The version ldflag is what helm's own Makefile sets (otherwise `helm version` says v4.x-dev).
LDFLAGS="-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
  exec bash "$(dirname "$0")/../install-go-tool.sh" helm "$HELM_VERSION" helm.sh/helm/v4/cmd/helm version "$@"
