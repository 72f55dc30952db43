"""How far `pelab verify`'s recomputed numbers move when other kernels compute them, for sizing its tolerance.

    python bench/verify_isa.py FOLDER

A study folder travels between machines, and ``pelab verify`` on another CPU recomputes its numbers with that CPU's
kernels: other vector widths, other summation orders. This recomputes a study with checkpoints in subprocesses
that force other kernels on this machine, as stand-ins for other CPUs: PyTorch's own
kernels at each vector width it has (``ATEN_CPU_CAPABILITY``), the BLAS limited to AVX2 (``MKL_ENABLE_INSTRUCTIONS``,
``ONEDNN_MAX_CPU_ISA``) and in its reproducible mode (``MKL_CBWR``), and one thread against two. For each it prints the
largest relative difference from the stored numbers (``pelab.report.verify.relative``), over every number verify
compares, so ``verify.TOLERANCE`` can be set well above what honest machines differ by and well below any margin
a verdict reads (±2%, and the causal cells' per-seed spread of 0.15–0.86%).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

#: Each stand-in for another CPU: a name and the environment it runs under.
KERNELS: dict[str, dict[str, str]] = {
    "as this machine, 2 threads": {},
    "1 thread": {"OMP_NUM_THREADS": "1"},
    "PyTorch kernels: no vectors": {"ATEN_CPU_CAPABILITY": "default"},
    "PyTorch kernels: AVX2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "BLAS limited to AVX2": {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "everything at AVX2": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
    },  # fmt: skip
    "BLAS reproducible mode": {"MKL_CBWR": "COMPATIBLE"},
}

CHILD = """
import json, sys
from pelab.report.verify import verify
found = verify(sys.argv[1], tol=1.0)
print(json.dumps({"runs": len(found.checked), "numbers": sum(c.compared for c in found.checked),
                  "largest": max((c.largest for c in found.checked), default=0.0),
                  "per_run": sorted(c.largest for c in found.checked)}))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path)
    a = p.parse_args()
    print(f"{a.folder}: largest relative difference of a recomputed number from the stored one")
    print("| kernels | runs | numbers | largest | median run's largest | s |")
    print("|---|---|---|---|---|---|")
    for name, env in KERNELS.items():
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", CHILD, str(a.folder)],
                             env={**os.environ, **env}, capture_output=True, text=True, check=True)  # fmt: skip
        r = json.loads(out.stdout.strip().splitlines()[-1])
        per = r["per_run"]
        median = per[len(per) // 2] if per else 0.0
        print(f"| {name} | {r['runs']} | {r['numbers']:,} | {r['largest']:.1e} | {median:.1e} | "
              f"{time.perf_counter() - start:.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
