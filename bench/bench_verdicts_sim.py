"""The verdict on the sim as a real server process (local transport, time scale 0.01): the nightly playbook
(KL probe, expected answers, early stopping) against state_leak at 1 and 3 speculative steps and against a
healthy noisy server, one run each per seed. Slow (minutes per run on 2 shared cores): the figures beside the
Monte Carlo in ``docs/metrics.md``.

    PYTHONPATH=. .venv/bin/python bench/bench_verdicts_sim.py [--seeds 1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml

from mtp_remote.experiment import diagnose as api
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
CASES = {"state_leak, 1 step": ("state_leak,numeric_noise=0.02", 1, False),
         "state_leak, 3 steps": ("state_leak,numeric_noise=0.02", 3, False),
         "healthy, numeric_noise 0.02, 3 steps": ("numeric_noise=0.02", 3, False),
         "healthy, numeric_noise 0.3, 3 steps, A/A arm": ("numeric_noise=0.3", 3, True)}


def one(d: Path, faults: str, steps: int, seed: int, calibration: bool = False) -> dict:
    inv = {"default_host": "sim", "hosts": {"sim": {
        "transport": "local", "engine": "sim", "workdir": str(d / "wd"), "port": free_port(),
        "model_path": "/models/Qwen3.6-27B",
        "python": sys.executable, "env": {"SGLANG_SIM_TIME_SCALE": "0.01", "SGLANG_SIM_FAULTS": faults}}}}
    (d / "inventory.yaml").write_text(yaml.safe_dump(inv))
    pb = yaml.safe_load((ROOT / "playbooks" / "nightly.yaml").read_text())
    pb["profiles"]["mtp"]["flags"] = pb["profiles"]["mtp"]["flags"].replace(
        "--speculative-num-steps 3", f"--speculative-num-steps {steps}").replace(
        "--speculative-num-draft-tokens 4", f"--speculative-num-draft-tokens {steps + 1}")
    pb["seed"] = 1234 + 1000 * seed
    if calibration:
        pb["compare"] = {**pb.get("compare", {}), "calibration": True}
    (d / "pb.yaml").write_text(yaml.safe_dump(pb))
    res = api.diagnose(inventory=str(d / "inventory.yaml"), playbook=str(d / "pb.yaml"), runs_dir=d / "runs")
    (v,) = res.summary["verdicts"]
    return {"kind": v["kind"], "evidence": v["evidence"], "exit": res.exit_code,
            "n": {c["profile"]: c["n"] for c in res.summary["cells"] if c["temperature"] > 0},
            "calibration": res.summary.get("calibration")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1)
    args = ap.parse_args()
    print("| case | seed | verdict | exit | samples per arm at T=0.7 (spec, base) | s |")
    print("|---|---:|---|---:|---:|---:|")
    cals = []
    for name, (faults, steps, calibration) in CASES.items():
        for seed in range(args.seeds):
            t0 = time.perf_counter()
            with tempfile.TemporaryDirectory() as tmp:
                r = one(Path(tmp), faults, steps, seed, calibration)
            if r["calibration"]:
                cals.append((seed, r["calibration"]))
            print(f"| {name} | {seed} | `{r['kind']}` | {r['exit']} | {r['n'].get('mtp')}, {r['n'].get('baseline')} | "
                  f"{time.perf_counter() - t0:.0f} |", flush=True)
            print(f"<!-- {r['evidence']} -->", flush=True)
    if cals:
        print("\n**The launch effect, A/A** (the baseline relaunched, same concurrency, numeric_noise 0.3)\n")
        print("| seed | greedy pairs differing | beyond a near tie | near-tie margin | A/A loops vs baseline (p) | "
              "tokens/s A/A / baseline |")
        print("|---:|---:|---:|---:|---|---:|")
        for seed, c in cals:
            loops = "; ".join(f"T={t}: {v['aa'][0]}/{v['aa'][1]} vs {v['base'][0]}/{v['base'][1]} (p={v['p']:.2g})"
                              for t, v in c["aa_loops"].items())
            print(f"| {seed} | {c['greedy_diverged']}/{c['greedy_pairs']} | {c['greedy_hard']} | "
                  f"{c['near_tie_margin']:.2g} | {loops} | {c['speed_ratio']:.2f} |")


if __name__ == "__main__":
    main()
