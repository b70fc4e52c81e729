"""Every benchmark, one after the other: ``make bench``.

Runs each script with this venv's Python from the repository root. The Milvus Lite
3.2.2 runs get their own packages (installed once under ``.bench/``, see
``_bench_common.lite_322_environment``); the server runs start the Milvus 2.3.5
standalone server from the ``milvus`` PyPI package. Each script prints its tables and
writes its JSON to ``benchmarks/results/``; ``docs/benchmarks.md`` holds the figures.

    .venv/bin/python benchmarks/run_all.py            # everything (about an hour on 2 cores)
    .venv/bin/python benchmarks/run_all.py --only rerank_pipeline end_to_end
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from _bench_common import ROOT, lite_322_environment

# (script, its arguments, engine: "venv" = Milvus Lite 2.5.1, "3.2.2" = Milvus Lite 3.2.2)
RUNS: list[tuple[str, list[str], str]] = [
    ("rerank_pipeline", [], "venv"),
    ("gate_features", [], "venv"),
    ("end_to_end", [], "venv"),  # all three engines, 3.2.2 in a child process
    ("wrapper_overhead", [], "venv"),
    ("attachment_lookups", [], "venv"),
    ("filter_overhead", [], "venv"),
    ("fan_out", [], "venv"),
    ("fan_out", ["--lite-files"], "venv"),
    ("fan_out", ["--server"], "venv"),
    ("range_pushdown", [], "venv"),
    ("range_pushdown", [], "3.2.2"),
    ("range_pushdown", ["--server"], "venv"),
    ("hybrid", [], "venv"),
    ("hybrid", ["--out", "benchmarks/results/hybrid-milvus-lite-3.json"], "3.2.2"),
    ("milvus_lite_engines", [], "venv"),
    ("milvus_lite_engines", [], "3.2.2"),
    ("concurrency_load", [], "venv"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="run only these scripts (by name)")
    args = parser.parse_args()
    failed = []
    for script, script_args, engine in RUNS:
        if args.only and script not in args.only:
            continue
        env = lite_322_environment() if engine == "3.2.2" else dict(os.environ)
        command = [sys.executable, str(ROOT / "benchmarks" / f"{script}.py"), *script_args]
        label = " ".join([f"{script}.py", *script_args]) + (
            " (milvus-lite 3.2.2)" * (engine == "3.2.2")
        )
        print(f"\n=== {label}", flush=True)
        start = time.perf_counter()
        if subprocess.run(command, cwd=ROOT, env=env).returncode:
            failed.append(label)
        print(f"=== {label}: {time.perf_counter() - start:.0f} s", flush=True)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
