#!/usr/bin/env bash
# The plan file is valid FlatBuffers against schemas/plan.fbs: codegen writes
# a sample plan (test_codegen --write-plan: x[1,S,8] -> Transpose -> MatMul W
# -> Add bias -> Softmax, two recorded passes), Debian's flatc decodes it to
# JSON with the schema, and the JSON holds what was built.  A JSON -> binary
# -> JSON round trip through flatc's own builder must give the same JSON.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=/usr/bin/python3
WORK=$BUILD/test-data/plan-schema
rm -rf "$WORK" && mkdir -p "$WORK"
PLAN=$WORK/sample.plan
JSON=$WORK/sample.json
. tests/tap.sh
plan_has() {   # plan_has PYTHON-EXPR : true for the decoded plan `p` (and `size`, the file size)
    $PY - "$JSON" "$PLAN" "$1" <<'EOF'
import json, os, sys
p = json.load(open(sys.argv[1]))
size = os.path.getsize(sys.argv[2])
ok = eval(sys.argv[3])
if not ok:
    print("false:", sys.argv[3])
sys.exit(0 if ok else 1)
EOF
}

check "test_codegen writes the sample plan" "$BUILD/tests/test_codegen" --write-plan "$PLAN"
check "flatc decodes it with schemas/plan.fbs" \
    flatc --json --raw-binary --strict-json -o "$WORK" schemas/plan.fbs -- "$PLAN"
check "identifier LLMC at bytes 4..7" sh -c "head -c 8 '$PLAN' | tail -c 4 | grep -q '^LLMC$'"
check "format_version 3, target generic" \
    plan_has "p['format_version'] == 3 and p['target'] == 'generic'"
check "compiler_version, max_context 32, source_hash" \
    plan_has "p['compiler_version'] == 'llmc 0.1.0' and p['max_context'] == 32 and p['source_hash'] == 0x1234"
check "7 tensors, 2 of them weights" \
    plan_has "len(p['tensors']) == 7 and [t['name'] for t in p['tensors'] if t.get('kind') == 'Weight'] == ['W', 'bias']"
check "op codes Copy, MatMul, Binary, Softmax" \
    plan_has "[o.get('code', 'Copy') for o in p['ops']] == ['Copy', 'MatMul', 'Binary', 'Softmax']"
check "Transpose region: src_axis = perm [1, 0, 2], size [S, 1, 8]" \
    plan_has "p['ops'][0]['regions'][0]['src_axis'] == [1, 0, 2] and p['ops'][0]['regions'][0]['size'][0] == {'c': 0, 's': 1, 'p': 0}"
check "Softmax axis 2, Binary kind Add" \
    plan_has "p['ops'][3]['axis'] == 2 and p['ops'][2].get('kind', 0) == 0"
check "bindings: input x, output y" \
    plan_has "[p['tensors'][b.get('tensor', 0)]['name'] for b in p['inputs']] == ['x'] and [p['tensors'][b['tensor']]['name'] for b in p['outputs']] == ['y']"
check "arena tensors: 64-aligned, inside arena_size" \
    plan_has "all(t.get('arena_offset', 0) % 64 == 0 and t.get('arena_offset', 0) + t['max_bytes'] <= p['arena_size'] for t in p['tensors'] if t.get('kind') != 'Weight')"
check "segments: 64-aligned, sizes 128 and 16, inside the file" \
    plan_has "[s['size'] for s in p['segments']] == [128, 16] and all(s['offset'] % 64 == 0 and s['offset'] + s['size'] <= size for s in p['segments'])"
check "passes recorded in order" \
    plan_has "[(q['name'], q['nodes']) for q in p['passes']] == [('shape-inference', 4), ('dead-code', 4)]"
roundtrip() {
    mkdir -p "$WORK/rt" &&
    # writes sample.plan (file_extension); --force-defaults keeps the fields
    # codegen writes at their default value (prefill_kernel 0)
    flatc -b --force-defaults -o "$WORK/rt" schemas/plan.fbs "$JSON" &&
    flatc --json --raw-binary --strict-json -o "$WORK/rt" schemas/plan.fbs -- "$WORK/rt/sample.plan" &&
    cmp "$JSON" "$WORK/rt/sample.json"
}
check "JSON -> flatc binary -> JSON round trip is identical" roundtrip

# The C tables come from runtime/plan_enums.h; plan.fbs must declare the
# same enums, names and values (flatc's implicit numbering: previous + 1).
schema_enums() {
    $PY - schemas/plan.fbs <<'EOF'
import re, sys
text = re.sub(r"//[^\n]*", "", open(sys.argv[1]).read())
for enum, body in re.findall(r"enum\s+(\w+)\s*:\s*\w+\s*\{([^}]*)\}", text):
    value = -1
    for item in filter(None, (x.strip() for x in body.split(","))):
        name, _, v = item.partition("=")
        value = int(v) if v.strip() else value + 1
        print(enum, name.strip(), value)
EOF
}
same_as_c() {   # schema_lines | same_as_c NAME FLAG MIN_LINES: equal to `llmc ops FLAG`
    sort >"$WORK/$1.fbs" &&
    "$BUILD/llmc" ops "$2" | sort >"$WORK/$1.c" &&
    [ "$(wc -l <"$WORK/$1.c")" -gt "$3" ] &&
    diff "$WORK/$1.fbs" "$WORK/$1.c"
}
same_enums() { schema_enums | same_as_c enums --plan-enums 80; }
check "every enum of plan.fbs equals its X-macro list in runtime/plan_enums.h" same_enums

# The reader and the writer name table fields by the ids of the lists in
# runtime/plan_format.h.  A FlatBuffers field's id is its declaration order
# (plan.fbs gives no `id:` attributes), which flatc's JSON schema keeps: every
# table of plan.fbs must list the same fields in the same order.
schema_fields() {
    flatc --jsonschema -o "$WORK" schemas/plan.fbs &&
    $PY - schemas/plan.fbs "$WORK/plan.schema.json" <<'EOF'
import json, re, sys
text = re.sub(r"//[^\n]*", "", open(sys.argv[1]).read())
if re.search(r"\bid\s*:", text):
    sys.exit("plan.fbs gives explicit field ids: declaration order is no longer the id")
definitions = json.load(open(sys.argv[2]))["definitions"]
for table in re.findall(r"^table\s+(\w+)", text, re.M):
    for id, field in enumerate(definitions["llmc_plan_" + table]["properties"]):
        print(table, field, id)
EOF
}
same_fields() { schema_fields | same_as_c fields --plan-fields 70; }
check "every table of plan.fbs lists its fields in order in runtime/plan_format.h" same_fields
tap_done
