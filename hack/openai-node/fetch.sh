#!/usr/bin/env bash
# Installs the OpenAI Node SDK once per machine into $SMG_OPENAI_NODE (default
# ~/.cache/smg-openai-node/v1) for internal/e2e's SDK test. Node and npm come from
# hack/tokenizer/fetch.sh (Debian's packages). A no-op when cached.
#
# Layout afterwards:  $DIR/node_modules/openai
set -euo pipefail
dir=${SMG_OPENAI_NODE:-$HOME/.cache/smg-openai-node/v1}
version=6.30.1 # the newest major that runs on Debian's Node 20 (7.x needs Node 22)
[ -f "$dir/.complete" ] && exit 0
tmp=$(mktemp -d "${dir%/*}/.fetch.XXXXXX" 2>/dev/null || { mkdir -p "${dir%/*}"; mktemp -d "${dir%/*}/.fetch.XXXXXX"; })
trap 'rm -rf "$tmp"' EXIT
( cd "$tmp" && echo '{"private":true}' >package.json &&
  npm install --no-audit --no-fund --silent "openai@$version" >/dev/null )
node -e 'require(process.argv[1]); ' "$tmp/node_modules/openai"
touch "$tmp/.complete"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
