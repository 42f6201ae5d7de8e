# Greedy runs compared by their logits (sourced by t_quant.sh and
# t_kvcache.sh; needs $PY); and the prompts of those runs.
# rel_err REF OUT [OTHER...] (file bases): max over rows of max|a - b| /
# max|a| between REF and OUT, over the rows every run given computed from
# the same tokens (row r follows the ids before it, so rows up to the
# first id where any two runs differ; OTHER runs only narrow the rows, so
# that two runs judged against one REF are judged on the same rows)
rel_err() {
    $PY - "$VOCAB" "$@" <<'EOF'
import sys, numpy as np
v = int(sys.argv[1])
a = np.fromfile(sys.argv[2] + ".bin", "<f4").reshape(-1, v).astype(np.float64)
b = np.fromfile(sys.argv[3] + ".bin", "<f4").reshape(-1, v).astype(np.float64)
ids = [open(p + ".tok").read().split() for p in sys.argv[2:]]
m = min(len(t) for t in ids)
n = next((i for i in range(m) if len({t[i] for t in ids}) > 1), m - 1) + 1
print("%.6f" % (np.abs(a[:n] - b[:n]).max(axis=1) / np.abs(a[:n]).max(axis=1)).max())
EOF
}

below() { awk -v x="$1" -v y="$2" 'BEGIN { exit !(x <= y) }'; }

# The greedy runs both tests compare: 32 new tokens after a prompt of one
# token, of seven, and of 64 spread over the zoo's 512-token vocabulary.
MAX_NEW=32
VOCAB=512
PROMPTS="5 5,17,42,7,99,3,250 $(seq -s, 0 63 | awk -F, '{for (i = 1; i <= NF; i++) printf "%s%d", (i > 1 ? "," : ""), ($i * 37 + 11) % 512}')"
