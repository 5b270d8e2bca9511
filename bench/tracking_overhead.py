"""What tracking costs a training run: TensorBoard HParams data and MLflow logging against the run's own time.

Trains the same LeNet on the same synthetic 28×28 dataset (after one warm-up run), alternating an untracked
run and a tracked run (``mlflow=URI``: an MLflow store, by default a SQLite file in a temporary folder, so no
server is needed; ``--mlflow http://...`` for a real server), ``--repeat`` times each. Inside the tracked runs it times every
tracking call (the MLflow run's start and parameters, each epoch's metrics, the end: final metrics, the
model's files as artifacts; the HParams data written at the end) and prints:

* the tracking seconds per run and their share of the untracked run's wall time (issue 42's target: ≤ 1 %);
* the median wall time of each side (noisier: both sides swing with the machine's load).

Tracking costs a fixed ~0.1-0.2 s per run plus one request per epoch, nothing per step: short runs show a
larger share than the 4096-image default.

The first tracked run also pays MLflow's import (in its start time; the SQLite store's schema is made
before the runs): the share uses the median over the later runs.

Usage::

    .venv/bin/python bench/tracking_overhead.py                       # 4096 images, 3 epochs, 3 repeats
    .venv/bin/python bench/tracking_overhead.py --n 512 --epochs 1 --repeat 1    # a quick look
    .venv/bin/python bench/tracking_overhead.py --mlflow http://127.0.0.1:5000  # a running server
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _quiet import LoadGuard, add_guard_args  # bench/: the load guard every bench shares


class Timer:
    """Wraps the tracking functions of the engine and adds up the seconds spent in them."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def wrap(self, module, name: str, label: str) -> None:
        original = getattr(module, name)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - start

        setattr(module, name, timed)

    def take(self) -> dict[str, float]:
        taken, self.seconds = self.seconds, {}
        return taken


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096, help="training images (default 4096)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side (default 3)")
    parser.add_argument("--mlflow", default=None, help="tracking URI (default: a SQLite store in a temp folder)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    add_guard_args(parser)
    args = parser.parse_args(argv)

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the suite's synthetic plugins
    from synthetic_plugins import SyntheticShapes

    from digits_core import registry
    from digits_core.datasets import create_dataset
    from digits_core.engine import hparams, mlflow_log, trainer

    timer = Timer()
    for name, label in (
        ("start_run", "start"),
        ("log_params", "parameters"),
        ("log_metrics", "metrics"),
        ("_log_model_files", "artifacts"),
        ("terminate", "end"),
    ):
        timer.wrap(mlflow_log, name, label)
    timer.wrap(trainer, "write_run_hparams", "hparams")
    timer.wrap(hparams, "write_hparams", "hparams (inner)")

    with tempfile.TemporaryDirectory(prefix="tracking-bench-") as tmp:
        jobs = Path(tmp) / "jobs"
        uri = args.mlflow or f"sqlite:///{Path(tmp) / 'mlflow.db'}"
        if args.mlflow is None:  # a SQLite store keeps artifacts in ./mlruns unless its experiment says where
            from mlflow.tracking import MlflowClient

            MlflowClient(uri).create_experiment(
                mlflow_log.DEFAULT_EXPERIMENT, artifact_location=(Path(tmp) / "artifacts").as_uri()
            )
        registry.register(SyntheticShapes)
        try:
            dataset = create_dataset(
                "synthetic-shapes",
                {"count": args.n, "val_count": max(args.n // 4, 16), "size": 28, "classes": 10},
                workers=1,
                jobs_dir=jobs,
            ).id
        finally:
            registry.unregister(SyntheticShapes)
        walls: dict[str, list[float]] = {"plain": [], "tracked": []}
        tracking: list[dict[str, float]] = []
        trainer.train(dataset, "lenet", jobs_dir=jobs, epochs=1, seed=1)  # warm-up: TensorFlow's first tracing
        timer.take()
        with LoadGuard.from_args(args) as guard:
            for index in range(args.repeat):
                for side in ("plain", "tracked") if index % 2 == 0 else ("tracked", "plain"):
                    extra = {"mlflow": uri} if side == "tracked" else {}
                    timer.take()
                    start = time.perf_counter()
                    trainer.train(dataset, "lenet", jobs_dir=jobs, epochs=args.epochs, seed=1, **extra)
                    walls[side].append(time.perf_counter() - start)
                    spent = timer.take()
                    if side == "tracked":
                        spent.pop("hparams (inner)", None)
                        tracking.append(spent)
                    else:  # an untracked run still writes its HParams data: that part is in both sides
                        walls.setdefault("plain hparams", []).append(spent.get("hparams", 0.0))
    plain = statistics.median(walls["plain"])
    per_run = [sum(spent.values()) for spent in tracking]
    later = per_run[1:] or per_run
    share = 100.0 * statistics.median(later) / plain
    result = {
        "n": args.n,
        "epochs": args.epochs,
        "repeat": args.repeat,
        "uri": "sqlite (temp)" if args.mlflow is None else args.mlflow,
        "plain_wall_s": plain,
        "tracked_wall_s": statistics.median(walls["tracked"]),
        "tracking_s_per_run": per_run,
        "tracking_parts_first_run": tracking[0] if tracking else {},
        "hparams_s_untracked": statistics.median(walls["plain hparams"]),
        "tracking_share_percent": share,
        "load": guard.summary(),
    }
    guard.refuse_if_strict()
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"untracked run: {plain:.2f} s (median of {len(walls['plain'])}); tracked: {result['tracked_wall_s']:.2f} s")
    print(f"tracking per run: {', '.join(f'{s:.3f}' for s in per_run)} s (first start includes MLflow's import)")
    print(
        "first tracked run's parts: "
        + ", ".join(f"{k} {v:.3f} s" for k, v in result["tracking_parts_first_run"].items())
    )
    print(f"HParams data of an untracked run: {result['hparams_s_untracked']:.3f} s")
    print(guard.mark(f"tracking share of the run's time: {share:.2f} % (target <= 1 %)"))
    print(f"load during the run: {guard.note()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
