#!/usr/bin/env bash
# gen.sh [OUTDIR] — generate the engines' Go packages from engine/proto/ into OUTDIR (default:
# the repository, which is what `make proto` does): engine/commonpb (smg.grpc.common),
# engine/sglangpb (sglang.grpc.scheduler) and engine/vllmpb (vllm.grpc.engine), each
# <name>.pb.go from protoc-gen-go and <name>_grpc.pb.go from protoc-gen-go-grpc.
# engine's TestGeneratedCodeIsCurrent runs this into a temporary directory and compares the
# result byte for byte with the committed files.
# Needs what hack/proto/tools.sh installs (`make tools`): protoc on PATH, the plugins in
# $SMG_TOOLS_BIN (default ~/.cache/smg-tools/bin).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "${1:-$root}" && cd "${1:-$root}" && pwd)
bin=${SMG_TOOLS_BIN:-$HOME/.cache/smg-tools/bin}
module=github.com/smg-go/smg

command -v protoc >/dev/null || { echo "gen.sh: protoc not found; run make tools" >&2; exit 1; }
for p in protoc-gen-go protoc-gen-go-grpc; do
  [ -x "$bin/$p" ] || { echo "gen.sh: $bin/$p not found; run make tools" >&2; exit 1; }
done

cd "$root/engine/proto"
protoc -I . \
  --plugin=protoc-gen-go="$bin/protoc-gen-go" \
  --plugin=protoc-gen-go-grpc="$bin/protoc-gen-go-grpc" \
  --go_out="$out" --go_opt=module=$module \
  --go-grpc_out="$out" --go-grpc_opt=module=$module \
  smg/grpc/common/common.proto \
  sglang/grpc/scheduler/sglang_scheduler.proto \
  vllm/grpc/engine/vllm_engine.proto
