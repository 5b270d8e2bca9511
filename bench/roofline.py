"""How close each workload runs to this machine's measured peak: FLOPs counted from the model, one run.

First the peak, measured here and now: fp32 ``tf.matmul`` of two 2048×2048 matrices inside a
``tf.function`` and two representative convolutions (LeNet's second, 5×5 20→50 on 12×12 at batch 64; a
U-Net 3×3 64→64 on 64×64 at batch 8), best of several. Then, for each workload, its FLOPs per image
counted from the traced graph of the very function that is timed (:mod:`_flops`: convolutions, their
gradients and matrix products; the test suite checks the count against TensorFlow's profiler and a hand
count), and the achieved GFLOP/s as a fraction of the matmul peak:

* **training**: the engine's real train step (``digits_core.engine.steps.make_steps``: the task's loss
  and metric, the optimizer update, ``float(loss)`` read back every step as the training loop does) at
  the network's default batch, fed tensors already in memory (the input pipeline is measured by
  ``bench/train_throughput.py``); ``unet3d`` trains as the volume loop does (``train_on_batch``);
* **inference**: the model in a ``tf.function`` at batch 1 and at batch 256 (smaller for the big inputs,
  named in the table: 256 U-Net 256² images do not fit in memory next to other work).

Workloads: LeNet 28², AlexNet 32×32×3, U-Net 64² and 256², ``unet3d`` on 48³ patches, ``detectnet``
128²×3, and each backbone of ``plugins/networks_backbones`` at 96²×3 (random weights: the arithmetic is
the same). The load guard (:mod:`_quiet`) marks every figure of a loaded run (``--strict`` refuses).

Run::

    .venv/bin/python bench/roofline.py --strict --json /tmp/roofline.json --docs   # ~5 min on 2 cores; docs section
    .venv/bin/python bench/roofline.py --quick                                                # smoke, ~1 min
    .venv/bin/python bench/roofline.py --only lenet --only unet --steps-per-execution 8      # + 8 steps per call
    .venv/bin/python bench/roofline.py --from-json /tmp/roofline.json --markdown -            # re-render only
    .venv/bin/python bench/roofline.py --flops-only --docs                                    # counts only, any load
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _flops import FlopCount, graph_flops  # noqa: E402
from _quiet import LoadGuard, add_guard_args  # noqa: E402


@dataclass(frozen=True)
class Workload:
    """One network at one input size: what is trained and inferred."""

    name: str
    network: str
    shape: tuple
    task: str
    outputs: int
    batch: int
    infer_batch: int = 256
    params: dict = field(default_factory=dict)


BACKBONES = ("mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_v2_b0", "resnet50_v2", "convnext_tiny")

FULL = [
    Workload("lenet 28²", "lenet", (28, 28, 1), "classification", 10, 64),
    Workload("alexnet-small 32²×3", "alexnet", (32, 32, 3), "classification", 10, 32),
    Workload("unet 64²", "unet", (64, 64, 1), "segmentation", 2, 16),
    Workload("unet 256²", "unet", (256, 256, 1), "segmentation", 2, 16, infer_batch=16),
    Workload("unet3d 48³", "unet3d", (48, 48, 48, 1), "volume", 2, 2, infer_batch=8),
    Workload("detectnet 128²×3", "detectnet", (128, 128, 3), "detection", 2, 4, infer_batch=64),
    *(Workload(f"{b} 96²×3", b, (96, 96, 3), "classification", 10, 32, infer_batch=64) for b in BACKBONES),
]
QUICK = [
    Workload("lenet 28²", "lenet", (28, 28, 1), "classification", 10, 64, infer_batch=32),
    Workload("unet 32²", "unet", (32, 32, 1), "segmentation", 2, 4, infer_batch=8),
    Workload("unet3d 16³", "unet3d", (16, 16, 16, 1), "volume", 2, 2, infer_batch=2),
    Workload("detectnet 64²×3", "detectnet", (64, 64, 3), "detection", 2, 4, infer_batch=8),
    Workload("mobilenet_v3_small 32²×3", "mobilenet_v3_small", (32, 32, 3), "classification", 10, 8, infer_batch=8),
]


def best_rate(fn, work: float, min_time: float, repeats: int) -> float:
    """Best ``work`` units per second over ``repeats`` timings of ``fn`` (each at least ``min_time`` s)."""
    fn()  # warm: tracing, first allocations
    calls, elapsed = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - t0
        if elapsed >= min_time:
            break
        calls = max(calls * 2, int(calls * min_time / max(elapsed, 1e-6)) + 1)
    best = elapsed / calls
    for _ in range(repeats - 1):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls)
    return work / best


def measure_peak(quick: bool, min_time: float, repeats: int) -> dict:
    """GFLOP/s of a 2048² matmul (1024² with ``--quick``) and of two representative convolutions."""
    import tensorflow as tf

    n = 1024 if quick else 2048
    rng = tf.random.Generator.from_seed(0)
    a, b = rng.normal((n, n)), rng.normal((n, n))
    matmul = tf.function(lambda a, b: tf.reduce_sum(tf.matmul(a, b)))
    peak = {f"matmul {n}²": best_rate(lambda: float(matmul(a, b)), 2.0 * n**3 / 1e9, min_time, repeats)}
    # bfloat16 for reference only (the engine trains in fp32 unless precision=bfloat16): where the CPU has native
    # bf16 (AVX512_BF16, AMX) oneDNN may run it several times faster; emulated, much slower (tensorflow#45441)
    a16, b16 = tf.cast(a, tf.bfloat16), tf.cast(b, tf.bfloat16)
    matmul16 = tf.function(lambda a, b: tf.reduce_sum(tf.cast(tf.matmul(a, b), tf.float32)))
    peak[f"matmul {n}² bfloat16 (reference only)"] = best_rate(
        lambda: float(matmul16(a16, b16)), 2.0 * n**3 / 1e9, min_time, repeats
    )
    conv = tf.function(lambda x, k: tf.reduce_sum(tf.nn.conv2d(x, k, 1, "VALID")))
    x, k = rng.normal((64, 12, 12, 20)), rng.normal((5, 5, 20, 50))
    flops = 2.0 * 64 * 8 * 8 * 50 * 5 * 5 * 20
    peak["conv 5×5 20→50 12² b64 (lenet conv2)"] = best_rate(lambda: float(conv(x, k)), flops / 1e9, min_time, repeats)
    same = tf.function(lambda x, k: tf.reduce_sum(tf.nn.conv2d(x, k, 1, "SAME")))
    x, k = rng.normal((8, 64, 64, 64)), rng.normal((3, 3, 64, 64))
    flops = 2.0 * 8 * 64 * 64 * 64 * 3 * 3 * 64
    peak["conv 3×3 64→64 64² b8 (unet)"] = best_rate(lambda: float(same(x, k)), flops / 1e9, min_time, repeats)
    return {key: round(value, 2) for key, value in peak.items()}


def synthetic_batch(w: Workload, batch: int):
    """``(x, y)`` tensors of the workload's shapes (learnable content does not change the arithmetic)."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(batch, *w.shape)).astype("float32"))
    if w.task == "classification":
        y = rng.integers(0, w.outputs, size=(batch,))
    elif w.task in ("segmentation", "volume"):
        y = rng.integers(0, w.outputs, size=(batch, *w.shape[:-1]))
    else:  # detection: a few boxes of class 1 per image, (class, x1, y1, x2, y2) in pixels
        side = w.shape[0]
        y = np.array([[[1, 8, 8, side // 3, side // 3], [1, side // 2, side // 2, side - 8, side - 4]]] * batch)
        return x, tf.constant(y.astype("float32"))
    return x, tf.constant(y.astype("int32"))


def build(w: Workload):
    """The workload's Keras model, built as a training run builds it."""
    if w.task == "volume":
        from digits_core.engine.volume_nets import build_unet

        return build_unet(w.shape[-1], w.outputs, dims=3)
    from digits_core.engine.networks import resolve_network
    from digits_core.engine.networks.custom import call_builder

    spec = resolve_network(w.network)
    model, _, _ = call_builder(spec.build, w.shape, w.outputs, dict(w.params), origin=spec.name)
    return model


def engine_train_step(w: Workload, model):
    """``(step(x, y) -> loss tensor, traced tf.function for FLOP counting)`` through the engine's own step."""
    import keras
    import tensorflow as tf

    if w.task == "volume":  # the volume loop: Keras compile + train_on_batch (digits_core.engine.volume_loop)
        from digits_core.engine.volume_nets import dice_ce_loss

        loss_fn = dice_ce_loss(w.outputs)
        model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=loss_fn)
        counter_opt = keras.optimizers.Adam(1e-3)

        @tf.function
        def same_math(x, y):  # train_on_batch's step, traced on its own for the count
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            counter_opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return (lambda x, y: float(model.train_on_batch(x, y))), same_math, None
    from digits_core.engine.steps import StepSpec, make_steps
    from digits_core.engine.tasks import task_named

    task = task_named(w.task)
    if task.bind is not None:
        task = task.bind(task, w.shape)
    optimizer = keras.optimizers.Adam(1e-3)
    optimizer.build(model.trainable_variables)
    spec = StepSpec(
        strategy=tf.distribute.get_strategy(),
        replicas=1,
        model=model,
        optimizer=optimizer,
        loss_fn=task.loss(None, w.outputs),
        task=task,
        num_outputs=w.outputs,
        standard_output=True,
        autograph=False,
    )
    train_step, _ = make_steps(spec)
    stop = tf.constant(0.0)

    def step(x, y):
        loss, metric, _ = train_step(x, y, stop)
        return float(loss), float(metric)  # the loop reads both back every step

    step.spec = spec  # type: ignore[attr-defined]  # for the steps-per-execution timing
    return step, train_step, stop


def multi_step_rate(step, x, y, k: int, min_time: float, repeats: int) -> float:
    """Images/s of the engine's ``steps_per_execution`` path: ``k`` steps per call, batches from an iterator."""
    import tensorflow as tf

    from digits_core.engine.steps import make_multi_step

    train_steps = make_multi_step(step.spec)
    iterator = iter(tf.data.Dataset.from_tensors((x, y)).repeat())
    n, stop = tf.constant(k), tf.constant(0.0)
    return best_rate(lambda: train_steps(iterator, n, stop)[0].numpy(), k * int(x.shape[0]), min_time, repeats)


def count(function, *args) -> FlopCount:
    import tensorflow as tf

    specs = [tf.TensorSpec.from_tensor(a) for a in args]
    return graph_flops(function.get_concrete_function(*specs).graph)


#: ``--steps-per-execution`` is timed only for steps up to this many FLOPs (~25 ms at 200 GFLOP/s): in bigger ones
#: the per-call dispatch (about a millisecond) is a few percent at most, and another trace of their step is costly.
SMALL_STEP_FLOPS = 5e9


def run_workload(
    w: Workload, peak: float | None, min_time: float, repeats: int, spe: int = 1, policy: str = "float32"
) -> dict:
    """One workload's row: FLOPs per image counted, and (``peak`` given) the measured rates.

    ``policy``: the Keras dtype policy the model is built with (``mixed_bfloat16``: bf16 compute, float32
    weights and output layers, as the engine's ``precision="bfloat16"`` builds it).
    """
    import keras
    import tensorflow as tf

    from digits_core.engine.precision import float32_outputs, policy_scope

    keras.backend.clear_session()
    gc.collect()
    with policy_scope(policy):
        model = build(w)
    if policy == "mixed_bfloat16":
        float32_outputs(model)
    x, y = synthetic_batch(w, w.batch)
    step, traced, stop = engine_train_step(w, model)
    train_count = count(traced, x, y, *([stop] if stop is not None else []))
    train_flops = train_count.total / w.batch
    row = {
        "workload": w.name,
        "network": w.network,
        "input": list(w.shape),
        "train_batch": w.batch,
        "policy": policy,
        "train_mflop_per_image": round(train_flops / 1e6, 3),
        "uncounted_ops": train_count.uncounted[:5],
    }
    if peak is None:  # --flops-only
        for label, batch in (("infer_b1", 1), ("infer_bN", w.infer_batch)):
            xb = synthetic_batch(w, batch)[0]
            counted = count(tf.function(lambda x: model(x, training=False)), xb)
            row["infer_mflop_per_image"] = round(counted.total / batch / 1e6, 3)
            row[f"{label}_batch"] = batch
        return row
    train_rate = best_rate(lambda: step(x, y), w.batch, min_time, repeats)
    row.update(
        train_img_s=round(train_rate, 2),
        train_gflop_s=round(train_rate * train_flops / 1e9, 2),
        train_fraction_of_peak=round(train_rate * train_flops / 1e9 / peak, 4),
    )
    if spe > 1 and hasattr(step, "spec") and train_flops * w.batch <= SMALL_STEP_FLOPS:
        rate = multi_step_rate(step, x, y, spe, min_time, repeats)
        row["steps_per_execution"] = spe
        row["train_spe_img_s"] = round(rate, 2)
        row["train_spe_fraction_of_peak"] = round(rate * train_flops / 1e9 / peak, 4)
    for label, batch in (("infer_b1", 1), ("infer_bN", w.infer_batch)):
        xb = synthetic_batch(w, batch)[0]
        infer = tf.function(lambda x: model(x, training=False))  # one per batch size: static shapes to count
        infer_count = count(infer, xb)
        flops = infer_count.total / batch
        rate = best_rate(lambda fn=infer, xb=xb: fn(xb).numpy(), batch, min_time, repeats)
        row["infer_mflop_per_image"] = round(flops / 1e6, 3)
        row[f"{label}_batch"] = batch
        row[f"{label}_img_s"] = round(rate, 2)
        row[f"{label}_gflop_s"] = round(rate * flops / 1e9, 2)
        row[f"{label}_fraction_of_peak"] = round(rate * flops / 1e9 / peak, 4)
        row["uncounted_ops"] += infer_count.uncounted[:5]
    return row


def machine() -> dict:
    import keras
    import tensorflow as tf

    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "python": platform.python_version(),
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
    }


def render_markdown(result: dict) -> str:
    """The docs' Roofline section body from a result: command, machine, quiet or loaded, the table."""
    load, mach = result["load"], result["machine"]
    verdict = load["verdict"]
    peak_key = result["peak_key"]
    lines = [
        f"Command: `{result['command']}` ({result['date']}, {result['wall_s']:.0f} s). Machine: {mach['cpu']}, "
        f"{mach['cores']} cores, TensorFlow {mach['tensorflow']} (intra-op threads "
        f"{mach.get('intra_op_threads') or 'default'}, inter-op {mach.get('inter_op_threads') or 'default'}), "
        f"Keras {mach['keras']}. "
        + (
            f"Load during the run: **{verdict}** (highest 1-minute load average {load['load_max']}, "
            f"{load['cores']} cores)."
            if result["peak"]
            else "Nothing timed."
        ),
        "",
    ]
    policies = sorted({r.get("policy", "float32") for r in result["workloads"]} - {"float32"})
    if policies:
        lines += [f"Workloads built with the Keras dtype policy **{', '.join(policies)}** (`--bfloat16`).", ""]
    speeds = verdict == "quiet" and bool(result["peak"])
    if not result["peak"]:
        lines += ["**FLOPs counted only** (`--flops-only`: nothing timed, so the load does not matter).", ""]
    elif not speeds:
        lines += [
            "**Loaded run: the speeds and fractions below are left out** (not results); the FLOP counts do not "
            "depend on the load. Re-run on a quiet machine to fill them.",
            "",
        ]
    if result["peak"]:
        lines += ["| peak (same run) | GFLOP/s |", "|---|---:|"]
        for key, value in result["peak"].items():
            lines.append(f"| {key}{' (the reference)' if key == peak_key else ''} | {value if speeds else '–'} |")
        lines.append("")
    lines += [
        "| workload | train batch | train MFLOP/img | train img/s | train % of peak | infer MFLOP/img "
        "| b1 img/s | b1 % | bN | bN img/s | bN % |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["workloads"]:
        if "error" in r:
            lines.append(f"| {r['workload']} | {r['error']} |" + " |" * 9)
            continue

        def fig(key: str, pct: bool = False, row: dict = r) -> str:
            if not speeds or key not in row:
                return "–"
            return f"{100 * row[key]:.0f} %" if pct else f"{row[key]:,.0f}"

        lines.append(
            f"| {r['workload']} | {r['train_batch']} | {r['train_mflop_per_image']:,.1f} | {fig('train_img_s')} | "
            f"{fig('train_fraction_of_peak', True)} | {r['infer_mflop_per_image']:,.1f} | {fig('infer_b1_img_s')} | "
            f"{fig('infer_b1_fraction_of_peak', True)} | {r['infer_bN_batch']} | {fig('infer_bN_img_s')} | "
            f"{fig('infer_bN_fraction_of_peak', True)} |"
        )
    multi = [r for r in result["workloads"] if "train_spe_img_s" in r]
    if multi:
        lines += [
            "",
            f"Training at {multi[0]['steps_per_execution']} steps per call (`--steps-per-execution`, the engine's "
            "`steps_per_execution`), same run:",
            "",
            "| workload | train img/s | % of peak | vs 1 step per call |",
            "|---|---:|---:|---:|",
        ]
        for r in multi:
            if speeds:
                lines.append(
                    f"| {r['workload']} | {r['train_spe_img_s']:,.0f} | {100 * r['train_spe_fraction_of_peak']:.0f} % "
                    f"| {r['train_spe_img_s'] / r['train_img_s']:.2f}× |"
                )
            else:
                lines.append(f"| {r['workload']} | – | – | – |")
    return "\n".join(lines) + "\n"


def print_table(result: dict, guard: LoadGuard) -> None:
    if not result["peak"]:  # --flops-only: counts, no speeds (nothing to guard)
        for r in result["workloads"]:
            print(
                f"{r['workload']:28} "
                + (
                    r.get("error")
                    or f"train {r['train_mflop_per_image']:10.1f} MFLOP/img, "
                    f"inference {r['infer_mflop_per_image']:10.1f} MFLOP/img"
                )
            )
        return
    guard.refuse_if_strict()
    for key, value in result["peak"].items():
        print(guard.mark(f"peak {key}: {value:.1f} GFLOP/s"))
    head = f"{'workload':28} {'MFLOP/img':>10} {'train img/s':>12} {'%peak':>6} {'b1 img/s':>9} {'%':>4} {'bN':>4} "
    print(head + f"{'bN img/s':>9} {'%':>4}")
    for r in result["workloads"]:
        if "error" in r:
            print(f"{r['workload']:28} {r['error']}")
            continue
        line = (
            f"{r['workload']:28} {r['train_mflop_per_image']:10.1f} {r['train_img_s']:12.0f} "
            f"{100 * r['train_fraction_of_peak']:5.0f}% {r['infer_b1_img_s']:9.0f} "
            f"{100 * r['infer_b1_fraction_of_peak']:3.0f}% {r['infer_bN_batch']:4d} {r['infer_bN_img_s']:9.0f} "
            f"{100 * r['infer_bN_fraction_of_peak']:3.0f}%"
        )
        if "train_spe_img_s" in r:
            line += (
                f"  | {r['steps_per_execution']} steps/call: {r['train_spe_img_s']:.0f} img/s "
                f"{100 * r['train_spe_fraction_of_peak']:.0f}%"
            )
        print(guard.mark(line))
    print(f"load: {guard.note()}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, short timings: a smoke run")
    parser.add_argument("--only", action="append", default=[], help="workloads whose name starts with this")
    parser.add_argument("--min-time", type=float, default=None, help="seconds per timing (default 0.5; quick 0.1)")
    parser.add_argument("--repeats", type=int, default=None, help="timings per figure, best kept (default 3)")
    parser.add_argument(
        "--steps-per-execution",
        type=int,
        default=1,
        metavar="K",
        help="also time training at K steps per call (the engine's steps_per_execution) where a step is small "
        "(<= 5 GFLOP); a second table",
    )
    parser.add_argument(
        "--bfloat16",
        action="store_true",
        help="build the workloads with Keras's mixed_bfloat16 policy (bf16 compute, float32 weights): whether this "
        "CPU's native bf16 pays at network level (the fractions stay against the fp32 matmul peak)",
    )
    parser.add_argument("--intra-op", type=int, default=0, help="TensorFlow's intra-op threads (0: its default)")
    parser.add_argument("--inter-op", type=int, default=0, help="TensorFlow's inter-op threads (0: its default)")
    parser.add_argument("--flops-only", action="store_true", help="count FLOPs per image only (no timing, no peak)")
    parser.add_argument("--json", metavar="PATH", help="write the result as JSON")
    parser.add_argument("--markdown", metavar="PATH", help="write the docs section (- for stdout)")
    parser.add_argument("--from-json", metavar="PATH", help="render a saved result (no measuring)")
    parser.add_argument(
        "--docs",
        action="store_true",
        help="write the section into docs/benchmarks.md between its roofline markers (the run's JSON, rendered)",
    )
    add_guard_args(parser)
    args = parser.parse_args(argv)
    if args.from_json:
        result = json.loads(Path(args.from_json).read_text())
        if args.docs:
            write_docs(result)
        else:
            _write_markdown(args.markdown or "-", result)
        return 0
    min_time = args.min_time if args.min_time is not None else (0.1 if args.quick else 0.5)
    repeats = args.repeats or (1 if args.quick else 3)
    chosen = [w for w in (QUICK if args.quick else FULL) if not args.only or w.name.startswith(tuple(args.only))]
    started = time.time()
    with LoadGuard.from_args(args) as guard:
        from digits_core.tf_quiet import quiet_tensorflow_startup

        quiet_tensorflow_startup()
        import tensorflow as tf

        if args.intra_op:
            tf.config.threading.set_intra_op_parallelism_threads(args.intra_op)
        if args.inter_op:
            tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)
        peak = {} if args.flops_only else measure_peak(args.quick, min_time, repeats)
        peak_key = next(iter(peak), None)
        rows = []
        for w in chosen:
            try:
                reference = peak[peak_key] if peak_key else None
                policy = "mixed_bfloat16" if args.bfloat16 else "float32"
                rows.append(run_workload(w, reference, min_time, repeats, args.steps_per_execution, policy))
            except Exception as exc:  # noqa: BLE001 - one broken workload must not lose the others' figures
                rows.append({"workload": w.name, "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
            print(f"  done: {w.name} ({time.time() - started:.0f} s)", file=sys.stderr, flush=True)
        info = machine()
    result = {
        "command": "bench/roofline.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
        "wall_s": round(time.time() - started, 1),
        "machine": info,
        "load": guard.summary(),
        "peak": peak,
        "peak_key": peak_key,
        "min_time_s": min_time,
        "repeats": repeats,
        "workloads": rows,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    print_table(result, guard)
    if args.markdown:
        _write_markdown(args.markdown, result)
    if args.docs:
        write_docs(result)
    return 0


#: The generated part of docs/benchmarks.md's Roofline section lies between these lines.
DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
BEGIN, END = "<!-- roofline: generated by bench/roofline.py --docs -->", "<!-- roofline: end -->"


def write_docs(result: dict, path: Path = DOCS) -> None:
    """Replace the generated block of docs/benchmarks.md with ``result`` rendered."""
    text = path.read_text(encoding="utf-8")
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not (sep and sep2):
        raise SystemExit(f"{path}: the markers {BEGIN!r} and {END!r} are missing")
    path.write_text(f"{head}{BEGIN}\n\n{render_markdown(result)}\n{END}{tail}", encoding="utf-8")
    print(f"wrote the roofline section of {path}")


def _write_markdown(path: str, result: dict) -> None:
    text = render_markdown(result)
    if path == "-":
        print(text, end="")
    else:
        Path(path).write_text(text)


if __name__ == "__main__":
    sys.exit(main())
