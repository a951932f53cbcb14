"""One verdict per trace: score.sh's lines against limits.py's (f32: 1e-5; bf16: the reference's own distance).

usage: python3 bench/unseen/judge.py LIMITS SCORE   (prints PASS/FAIL lines and FAILING: the names; writes them
to $JUDGE_FAILS when set)
"""
import os, re, sys
lim = {}
for l in open(sys.argv[1]):
    p = l.split()
    if len(p) >= 3 and p[1] == "limit":
        lim[p[0]] = float(p[2])
fails = []
for l in sorted(open(sys.argv[2])):
    name = l.split()[0]
    m = re.search(r"to rel-RMS ([0-9.e+-]+|inf)", l)
    rel = float(m.group(1)) if m else float("inf")
    base, prec = name.rsplit("-", 1)
    limit = 1e-5 if prec == "f32" else lim.get(base, float("nan"))
    ok = rel <= limit
    if not ok:
        fails.append(name)
    print(f"{name:34s} {'PASS' if ok else 'FAIL'} {rel:.4g} (limit {limit:.4g}) {'' if ok else l.split(None,3)[3][:150].strip()}")
print("FAILING:", " ".join(fails))
if os.environ.get("JUDGE_FAILS"):
    open(os.environ["JUDGE_FAILS"], "w").write("\n".join(fails))
