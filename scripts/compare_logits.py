#!/usr/bin/python3
"""Compare two raw float32 logits files row by row.

    compare_logits.py REF.bin OUT.bin --vocab V [--rtol 1e-4]

Both files hold little-endian float32 rows of V values (one per generated
token, as written by scripts/ort_generate.js and `llmc run --logits-out`).
Row r passes when max|ref_r - out_r| <= rtol * max|ref_r|; the tolerance is
relative to the row's largest logit because individual logits may be near 0.
Exit status: 0 all rows pass, 1 mismatch, 2 usage/IO error.
"""
import argparse
import os
import sys

import numpy as np


def load_rows(path, vocab):
    size = os.path.getsize(path)
    if size % (4 * vocab) != 0:
        raise ValueError(f"{path}: {size} bytes is not a multiple of 4*vocab={4 * vocab}")
    return np.fromfile(path, dtype="<f4").reshape(-1, vocab)


def row_errors(ref, out):
    """Per row: max abs difference and the row's max |ref| (float64)."""
    diff = np.abs(ref.astype(np.float64) - out.astype(np.float64)).max(axis=1)
    scale = np.abs(ref.astype(np.float64)).max(axis=1)
    return diff, scale


def main(argv=None):
    ap = argparse.ArgumentParser(description="compare raw float32 logits files")
    ap.add_argument("ref")
    ap.add_argument("out")
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--rtol", type=float, default=1e-4)
    args = ap.parse_args(argv)
    try:
        ref_size, out_size = os.path.getsize(args.ref), os.path.getsize(args.out)
        if ref_size != out_size:
            print(f"compare_logits: size mismatch: {args.ref} {ref_size} bytes, "
                  f"{args.out} {out_size} bytes")
            return 1
        ref, out = load_rows(args.ref, args.vocab), load_rows(args.out, args.vocab)
    except (OSError, ValueError) as e:
        print(f"compare_logits: {e}", file=sys.stderr)
        return 2
    if ref.shape[0] == 0:
        print("compare_logits: files are empty")
        return 1
    diff, scale = row_errors(ref, out)
    # NaN anywhere must fail: NaN comparisons are False, so test for pass.
    ok = bool(np.all(diff <= args.rtol * scale))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = diff / scale
    ratio[np.isnan(ratio) & (diff != 0)] = np.inf  # NaN logits or 0/0 with error
    ratio[np.isnan(ratio)] = 0.0                     # 0/0: identical all-zero row
    worst = int(np.argmax(ratio))
    status = "ok" if ok else "MISMATCH"
    print(f"compare_logits: {status} rows={ref.shape[0]} worst_row={worst} "
          f"max_abs_err={diff[worst]:.3e} max_abs_ref={scale[worst]:.3e} "
          f"ratio={ratio[worst]:.3e} rtol={args.rtol:g}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
