# The tests' cache (sourced by tests/zoo.sh and the tests that run ONNX
# Runtime): model exports and reference outputs, which depend only on their
# inputs and not on the build, kept in ${LLMC_CACHE:-build/cache} whatever
# $BUILD is, so the plain and the sanitizer builds compute each once.
#
# An entry is a folder named after an xxh64 digest of everything its content
# depends on: the command's arguments, the contents of the scripts and input
# files it reads, and the versions of the packages that compute it.  A
# changed input is a new key, so an entry is never used stale.  An entry is
# complete or absent: its command fills a fresh temporary folder, which is
# renamed to the entry's name only when the command succeeded, under a lock
# (flock on ENTRY.lock) so that tests wanting the same entry at the same time
# compute it once.  A failure is not cached.
LLMC_CACHE=${LLMC_CACHE:-build/cache}

# cache_digest TEXT FILE...: the xxh64 (16 hex digits) of TEXT and of the
# contents of the files (not their paths).
cache_digest() {
    local - text=$1 f
    set -o pipefail
    shift
    {
        printf '%s\n' "$text"
        for f in "$@"; do
            xxhsum -H64 <"$f" | cut -d' ' -f1 || return 1
        done
    } | xxhsum -H64 | cut -d' ' -f1
}

# cache_fill DIR COMMAND ARG...: unless DIR exists, runs COMMAND TMP ARG...
# with TMP a fresh folder beside DIR and makes TMP into DIR if it succeeds.
# Returns COMMAND's status (0 when DIR was there).
cache_fill() {
    local dir=$1
    shift
    [ -d "$dir" ] && return 0
    mkdir -p "$(dirname "$dir")" || return 1
    (
        flock 9 || exit 1
        [ -d "$dir" ] && exit 0
        tmp=$(mktemp -d "$dir.tmp.XXXXXX") || exit 1
        "$1" "$tmp" "${@:2}"
        rc=$?
        if [ "$rc" -eq 0 ]; then
            mv -T "$tmp" "$dir" || { rm -rf "$tmp"; exit 1; }
        else
            rm -rf "$tmp"
        fi
        exit "$rc"
    ) 9>"$dir.lock"
}

# The files ONNX Runtime reads for MODEL: MODEL itself and, when it names
# external data files ("location" entries), every other file in its folder
# but logs (over-inclusion only makes the key stricter).
cache_model_files() {
    local f
    echo "$1"
    if grep -qa location "$1"; then
        for f in "$(dirname "$1")"/*; do
            [ -f "$f" ] && [ "$f" != "$1" ] && [ "${f%.log}" = "$f" ] && echo "$f"
        done
    fi
}

# CACHE_ORT_ENV: the ONNX Runtime this machine runs (node's version and
# onnxruntime-node's package.json), set once per shell.
cache_ort_env() {
    [ -n "${CACHE_ORT_ENV:-}" ] ||
        CACHE_ORT_ENV="node $(node --version 2>&1) ort $(cache_digest "" .deps/node_modules/onnxruntime-node/package.json 2>&1)"
}

# ort_generate MODEL LOGITS ARG...: scripts/ort_generate.js MODEL ARG...
# --logits-out LOGITS, its ids on stdout, as a cached reference (keyed by the
# script, MODEL's bytes, ARG... and the ONNX Runtime version).  A failed run
# shows ort_generate.js's stderr and is not cached.
ort_generate() {
    local model=$1 logits=$2 key dir
    shift 2
    local -a files
    mapfile -t files < <(cache_model_files "$model")
    cache_ort_env
    key=$(cache_digest "ort_generate $* $CACHE_ORT_ENV" scripts/ort_generate.js "${files[@]}") || return 1
    dir=$LLMC_CACHE/ort/generate-$key
    cache_fill "$dir" ort_generate_into "$model" "$@" || return 1
    cp "$dir/logits.bin" "$logits" && cat "$dir/ids.txt"
}
ort_generate_into() {   # ort_generate_into DIR MODEL ARG...
    local dir=$1 model=$2
    shift 2
    node scripts/ort_generate.js "$model" "$@" --logits-out "$dir/logits.bin" >"$dir/ids.txt"
}

# tokenize_ref JSON ARG... <TEXT: scripts/tokenize_ref.js JSON ARG... on
# TEXT, its stdout and stderr (--time's figure: measured when the entry was
# made) as a cached reference, keyed by the script, the tokenizers package,
# node's version, JSON's and TEXT's bytes and ARG....
tokenize_ref() {
    local json=$1 input key dir rc
    shift
    input=$(mktemp) || return 1
    cat >"$input"
    key=$(cache_digest "tokenize_ref $* $(node --version 2>&1)" scripts/tokenize_ref.js \
        .deps/node_modules/@huggingface/tokenizers/package.json "$json" "$input") || { rm -f "$input"; return 1; }
    dir=$LLMC_CACHE/tokenize/ref-$key
    cache_fill "$dir" tokenize_ref_into "$json" "$input" "$@"
    rc=$?
    rm -f "$input"
    [ "$rc" -eq 0 ] || return "$rc"
    cat "$dir/stderr" >&2
    cat "$dir/stdout"
}
tokenize_ref_into() {   # tokenize_ref_into DIR JSON TEXT ARG...
    node scripts/tokenize_ref.js "$2" "${@:4}" <"$3" >"$1/stdout" 2>"$1/stderr" ||
        { cat "$1/stderr" >&2; return 1; }
}
