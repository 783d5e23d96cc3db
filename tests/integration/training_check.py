#!/usr/bin/env python3
"""examples/ddp_train under cclrun, checked end to end:

  equivalence  1, 2 and 4 ranks on the same global batch (32 samples a step) end with the same
               held-out loss (the same parameters, to float tolerance);
  compression  TopK 1% and 1-bit with error feedback reach within 5% of the uncompressed
               held-out loss in the same number of steps, and are visibly worse (>= 8%) without
               error feedback.

  training_check.py CCLRUN DDP_TRAIN {equivalence|compression}
"""
import json
import subprocess
import sys


def run(cclrun, prog, ranks, *flags):
    cmd = [cclrun, "--timeout", "120", "-np", str(ranks), prog, "--quiet", *flags]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if out.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {out.returncode}:\n{out.stdout}\n{out.stderr}")
    lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
    if len(lines) != 1:
        sys.exit(f"FAIL: {' '.join(cmd)}: expected one JSON line, got:\n{out.stdout}")
    result = json.loads(lines[0])
    print(f"{' '.join(cmd[3:])}: eval_loss {result['eval_loss']:.6f}, "
          f"bytes {result['bytes_sent']}")
    return result


def equivalence(cclrun, prog):
    base = None
    for ranks in (1, 2, 4):
        r = run(cclrun, prog, ranks, "--steps", "40", "--batch", str(32 // ranks))
        if base is None:
            base = r["eval_loss"]
        elif abs(r["eval_loss"] - base) > 1e-5 * max(1.0, abs(base)) + 1e-6:
            sys.exit(f"FAIL: {ranks} ranks end with held-out loss {r['eval_loss']}, 1 rank with {base}")


def compression(cclrun, prog):
    steps = ["--steps", "300"]
    plain_run = run(cclrun, prog, 2, *steps)
    plain = plain_run["eval_loss"]
    failures = []
    for spec in ("topk:0.01", "onebit"):
        with_ef = run(cclrun, prog, 2, *steps, "--compress", spec)
        without = run(cclrun, prog, 2, *steps, "--compress", spec, "--no-error-feedback")
        if with_ef["eval_loss"] > 1.05 * plain:
            failures.append(f"{spec} with error feedback: {with_ef['eval_loss']:.6f} is more than 5% "
                            f"above the uncompressed {plain:.6f}")
        if without["eval_loss"] < 1.08 * with_ef["eval_loss"]:
            failures.append(f"{spec} without error feedback: {without['eval_loss']:.6f} is not "
                            f"visibly worse than with it ({with_ef['eval_loss']:.6f})")
        if with_ef["bytes_sent"] * 5 > plain_run["bytes_sent"]:
            failures.append(f"{spec} sent {with_ef['bytes_sent']} bytes: not 5x fewer than plain")
    if failures:
        sys.exit("FAIL: " + "; ".join(failures))


def main():
    if len(sys.argv) != 4 or sys.argv[3] not in ("equivalence", "compression"):
        sys.exit(__doc__)
    {"equivalence": equivalence, "compression": compression}[sys.argv[3]](sys.argv[1], sys.argv[2])
    print("PASS")


if __name__ == "__main__":
    main()
