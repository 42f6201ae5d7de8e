#!/usr/bin/env bash
# Install the build/test dependencies of llmc (clang + libclang-rt-dev: the
# libFuzzer and sanitizer runtimes of tests/fuzz; valgrind: t_valgrind;
# graphviz: t_dot renders the --dot pass pictures; gcc-aarch64-linux-gnu,
# libc6-dev-arm64-cross, qemu-user: t_neon cross-compiles the NEON kernels
# and runs their test under qemu-aarch64; bible-kjv, bible-kjv-text, fortunes,
# python3-regex, libopenblas0-serial: scripts/train_tiny.py's text, its BPE
# pre-tokenizer regex and a BLAS that makes CPU training take minutes, not hours).
#   - Debian packages via apt-get (apt-get update only when something is missing)
#   - onnxruntime-node (reference runtime for tests) into <repo>/.deps via npm
#   - @huggingface/tokenizers (reference tokenizer, scripts/ort_eval.js) likewise
# Idempotent: a second run only checks and prints "present" lines.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS_DIR="$REPO_ROOT/.deps"
ORT_NODE_VERSION="1.30.0"
HF_TOKENIZERS_VERSION="0.2.0"

APT_PACKAGES=(
  gcc make libprotobuf-c-dev protobuf-c-compiler libonnx-dev libxxhash-dev
  flatbuffers-compiler python3-torch python3-onnx libonnx-testdata valgrind clang
  xxhash time libclang-rt-dev graphviz
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
  bible-kjv bible-kjv-text fortunes python3-regex libopenblas0-serial
)

die() { echo "deps.sh: error: $*" >&2; exit 1; }

is_installed() {
  # dpkg -s succeeds for removed-but-configured packages too; check the status line.
  dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed'
}

run_as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else die "need root (or sudo) to run: $*"
  fi
}

install_apt_packages() {
  local missing=() pkg
  for pkg in "${APT_PACKAGES[@]}"; do
    if is_installed "$pkg"; then echo "apt: $pkg present"
    else missing+=("$pkg")
    fi
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  echo "apt: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  run_as_root apt-get update -qq || die "apt-get update failed"
  run_as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    || die "apt-get install failed for: ${missing[*]}"
  for pkg in "${missing[@]}"; do
    is_installed "$pkg" || die "package $pkg still not installed"
    echo "apt: $pkg installed"
  done
}

installed_ort_node_version() {
  local pkg_json="$DEPS_DIR/node_modules/onnxruntime-node/package.json"
  [ -f "$pkg_json" ] || return 0
  node -e 'process.stdout.write(require(process.argv[1]).version)' "$pkg_json"
}

install_ort_node() {
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "apt: installing nodejs npm (node or npm missing)"
    run_as_root apt-get install -y -qq --no-install-recommends nodejs npm \
      || die "node/npm missing and apt-get install nodejs npm failed"
  fi
  if [ "$(installed_ort_node_version)" = "$ORT_NODE_VERSION" ]; then
    echo "npm: onnxruntime-node@$ORT_NODE_VERSION present in .deps"
    return 0
  fi
  mkdir -p "$DEPS_DIR"
  [ -f "$DEPS_DIR/package.json" ] \
    || echo '{ "name": "llmc-deps", "private": true }' > "$DEPS_DIR/package.json"
  echo "npm: installing onnxruntime-node@$ORT_NODE_VERSION into .deps"
  # --ignore-scripts: the postinstall script downloads CUDA bits from nuget.org,
  # which is unreachable; the linux-x64 CPU binary ships inside the npm tarball.
  (cd "$DEPS_DIR" && npm install --ignore-scripts --no-audit --no-fund --silent \
      "onnxruntime-node@$ORT_NODE_VERSION") \
    || die "npm install onnxruntime-node@$ORT_NODE_VERSION failed"
  [ "$(installed_ort_node_version)" = "$ORT_NODE_VERSION" ] \
    || die "onnxruntime-node@$ORT_NODE_VERSION missing after npm install"
  (cd "$DEPS_DIR" && node -e 'require("onnxruntime-node")') \
    || die "onnxruntime-node installed but fails to load"
  echo "npm: onnxruntime-node@$ORT_NODE_VERSION installed"
}

# An installed copy is kept, whatever its version.
install_hf_tokenizers() {
  if [ -f "$DEPS_DIR/node_modules/@huggingface/tokenizers/package.json" ]; then
    echo "npm: @huggingface/tokenizers present in .deps"
    return 0
  fi
  echo "npm: installing @huggingface/tokenizers@$HF_TOKENIZERS_VERSION into .deps"
  (cd "$DEPS_DIR" && npm install --no-audit --no-fund --silent \
      "@huggingface/tokenizers@$HF_TOKENIZERS_VERSION") \
    || die "npm install @huggingface/tokenizers@$HF_TOKENIZERS_VERSION failed"
  (cd "$DEPS_DIR" && node -e 'require("@huggingface/tokenizers")') \
    || die "@huggingface/tokenizers installed but fails to load"
}

install_apt_packages
install_ort_node
install_hf_tokenizers
echo "deps: all dependencies present"
