#!/usr/bin/env bash
# llmc compile --dump-passes DIR --dot: a Graphviz picture beside every pass
# dump; each renders with Graphviz's dot, the last one clusters the decoder
# layers and shows the fused Attention ops, new nodes are marked with the
# pass that made them, two compiles give the same bytes; usage and write
# errors.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
WORK=$BUILD/test-data/dot
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
. tests/zoo.sh
exits_with() {   # exits_with CODE command... : the command fails with exactly CODE
    local want=$1; shift
    "$@" 2>"$WORK/stderr.txt"; local got=$?
    [ "$got" -eq "$want" ] || { echo "exit status $got, expected $want"; cat "$WORK/stderr.txt"; return 1; }
}
stderr_has() {   # stderr_has TEXT: the last exits_with command's stderr mentions TEXT
    grep -qF -- "$1" "$WORK/stderr.txt" || { echo "stderr lacks '$1':"; cat "$WORK/stderr.txt"; return 1; }
}

MODEL=$(zoo_model llama 14) || { echo "Bail out! cannot export the llama@14 test model"; exit 1; }
LAYERS=2   # the zoo's tiny exports have 2 decoder layers

compile_dot() {   # compile_dot NAME: dumps and pictures in $WORK/NAME, pass table in NAME.log
    "$LLMC" compile "$MODEL" -o "$WORK/$1.plan" --max-context 256 --dump-passes "$WORK/$1" --dot \
        >"$WORK/$1.log" 2>&1 || { cat "$WORK/$1.log"; return 1; }
}
check "compile --dump-passes DIR --dot" compile_dot a
compile_dot b >/dev/null

one_dot_per_txt() {
    local txt dot
    txt=$(cd "$WORK/a" && ls *.txt | sed 's/\.txt$//')
    dot=$(cd "$WORK/a" && ls *.dot | sed 's/\.dot$//')
    [ -n "$txt" ] && [ "$txt" = "$dot" ] || { echo "txt: $txt"; echo "dot: $dot"; return 1; }
}
check "one NN-<pass>.dot beside every NN-<pass>.txt" one_dot_per_txt

all_render() {   # every picture renders to a non-empty SVG
    local f
    for f in "$WORK"/a/*.dot; do
        dot -Tsvg "$f" -o "${f%.dot}.svg" || { echo "dot failed on $f"; return 1; }
        grep -q '<svg' "${f%.dot}.svg" || { echo "no svg from $f"; return 1; }
    done
}
check "every picture renders with dot -Tsvg" all_render

LAST=$(ls "$WORK"/a/*.dot | tail -1)
count_of() { grep -c -- "$1" "$LAST"; }
check "the last picture ($(basename "$LAST")) has one cluster_layer_ per layer ($LAYERS)" \
    test "$(count_of 'subgraph cluster_layer_')" -eq "$LAYERS"
# The pass table's attention-fusion line says "N of M layers fused".
FUSED=$(sed -n 's/.* attention-fusion .* \([0-9][0-9]*\) of [0-9][0-9]* layers fused.*/\1/p' "$WORK/a.log")
check "the pass table reports every layer's attention fused ($FUSED of $LAYERS)" test "${FUSED:-0}" -eq "$LAYERS"
check "the last picture has as many Attention nodes as were fused" \
    test "$(count_of 'label="Attention\\n')" -eq "${FUSED:-x}"

# Origin marks: linear-fusion created every Linear (outlined in its own
# picture); the Attention ops came from attention-fusion (not outlined).
origin_marks() {
    local linear attention pic
    pic=$(ls "$WORK"/a/*-linear-fusion.dot)
    linear=$(grep -F 'label="Linear\n' "$pic")
    attention=$(grep -F 'label="Attention\n' "$pic")
    [ -n "$linear" ] && ! grep -v 'by linear-fusion.*penwidth=3' <<<"$linear" || { echo "$linear"; return 1; }
    ! grep -v 'by attention-fusion' <<<"$attention" && ! grep penwidth <<<"$attention"
}
check "nodes are marked with the pass that created them, linear-fusion's outlined in its picture" origin_marks
check "llmc-domain nodes are filled, ONNX ones are not" \
    sh -c "grep -F 'label=\"Gather\\n' '$LAST' | grep -vq filled &&
           grep -F 'label=\"RMSNorm\\n' '$LAST' | grep -q filled"

check "two compiles give byte-identical pictures" diff -r -x '*.svg' "$WORK/a" "$WORK/b"

check "--dot without --dump-passes exits 2" exits_with 2 "$LLMC" compile "$MODEL" -o "$WORK/u.plan" --dot
check "... and says --dot needs --dump-passes" stderr_has "--dot needs --dump-passes DIR"
mkdir -p "$WORK/c/00-import.dot"   # a folder where the first picture should go
check "a picture that cannot be written exits 5" \
    exits_with 5 "$LLMC" compile "$MODEL" -o "$WORK/c.plan" --dump-passes "$WORK/c" --dot
check "... naming the path" stderr_has "cannot write '$WORK/c/00-import.dot'"
check "... and writes no plan" test ! -e "$WORK/c.plan"
check "compile --help lists --dot" sh -c "'$LLMC' compile --help | grep -q -- '--dot'"

tap_done
