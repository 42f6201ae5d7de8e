# TAP helpers for tests/t_*.sh (sourced).  The caller sets WORK (a scratch
# folder); `check "what" command...` runs the command and prints
# "ok N - what" or "not ok N - what" followed by the command's output (its
# first TAP_LOG_LINES lines, default 20); `tap_done` prints the plan line and
# returns non-zero if anything failed; `within A B TOLERANCE` checks a
# figure against a reference, |A/B - 1| <= TOLERANCE.
n=0 failures=0
check() {
    local what=$1; shift
    n=$((n + 1))
    if "$@" >"$WORK/last.log" 2>&1; then echo "ok $n - $what"
    else failures=$((failures + 1)); echo "not ok $n - $what"; sed 's/^/# /' "$WORK/last.log" | head -"${TAP_LOG_LINES:-20}"; fi
}
within() {   # within A B TOLERANCE: |A/B - 1| <= TOLERANCE
    [ -n "$1" ] && [ -n "$2" ] || { echo "missing figure: '$1' '$2'"; return 1; }
    awk -v a="$1" -v b="$2" -v t="$3" \
        'BEGIN { d = a / b - 1; if (d < 0) d = -d; printf "relative difference %.5f\n", d; exit !(d <= t) }'
}
tap_done() {
    echo "1..$n"
    [ "$failures" -eq 0 ]
}
