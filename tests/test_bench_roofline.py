"""bench/roofline.py and the benches' load guard: FLOPs counted right, loaded runs never shown as results.

The FLOP counter (bench/_flops.py) is checked three ways: against a hand count of LeNet (forward and the
engine's training step), op by op against TensorFlow's own profiler on a U-Net training graph (every
convolution and gradient the profiler has statistics for), and against a hand count of the 3-D
convolutions and transposed convolutions the profiler cannot count. No test here times anything.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import _quiet  # noqa: E402

# LeNet on 28x28x1, 10 classes, multiply-adds x 2: conv1 5x5 1->20 to 24x24, conv2 5x5 20->50 to 8x8, fc 800->500->10
CONV1, CONV2, FC1, FC2 = 2 * 24 * 24 * 20 * 25, 2 * 8 * 8 * 50 * 25 * 20, 2 * 800 * 500, 2 * 500 * 10


def _cpu(*marks):
    """A CPU-time reader for the guard: (machine busy s, own s) at start, then at stop."""
    values = iter(marks)
    return lambda: next(values)


def test_load_guard_marks_and_refuses_loaded_runs(capsys):
    loads = iter([0.5, 1.9, 5.0, 1.0, 1.0, 1.0])
    # over ~0.1 s on 2 cores, others used 0.19 - 0.01 = 0.18 CPU-s: ~90 % of the machine
    guard = _quiet.LoadGuard(cores=2, interval=0.01, read=lambda: next(loads, 1.0), cpu=_cpu((0, 0), (0.19, 0.01)))
    with guard:
        threading.Event().wait(0.1)
    assert not any(t.name == "bench-load-guard" for t in threading.enumerate())  # no thread left behind
    summary = guard.summary()
    assert guard.loaded and summary["verdict"] == "loaded" and summary["load_max"] == 5.0
    assert summary["others_share"] > _quiet.OTHERS_LIMIT
    assert guard.mark("ratio 1.04").startswith("ratio 1.04 (loaded (others used ")
    strict = _quiet.LoadGuard(strict=True, cores=2, read=lambda: 1.0, cpu=_cpu((0, 0), (50.0, 0))).start()
    strict.stop()
    with pytest.raises(SystemExit) as refused:
        strict.mark("ratio 1.04")
    assert refused.value.code == _quiet.LOADED_EXIT and "refused" in capsys.readouterr().err
    # the bench's own busy threads read a load of 2.1 on 2 cores: all that CPU time is its own, so it is quiet
    busy = _quiet.LoadGuard(strict=True, cores=2, read=lambda: 2.1, cpu=_cpu((0, 0), (0.2, 0.2))).start()
    threading.Event().wait(0.1)
    busy.stop()
    assert not busy.loaded and busy.mark("ratio 1.04") == "ratio 1.04"
    # where /proc/stat cannot be read, a load above the core count is the verdict
    blind = _quiet.LoadGuard(cores=2, read=lambda: 3.0, cpu=lambda: None).start()
    blind.stop()
    assert blind.loaded and blind.summary()["others_share"] is None
    # the real readers: this process's own CPU time is never counted as someone else's
    real = _quiet.LoadGuard(cores=2).start()
    sum(i * i for i in range(2_000_000))
    real.stop()
    assert real.others_share is not None and real.others_share < 1.0


@pytest.mark.slow
def test_flops_lenet_match_a_hand_count():
    import roofline

    w = roofline.QUICK[0]
    assert w.network == "lenet"
    model = roofline.build(w)
    x, y = roofline.synthetic_batch(w, 4)
    _, train_step, stop = roofline.engine_train_step(w, model)
    train = roofline.count(train_step, x, y, stop)
    # forward + weight gradients everywhere, input gradients except conv1's (its input is the data: pruned)
    assert train.total / 4 == 2 * CONV1 + 3 * (CONV2 + FC1 + FC2)
    assert not train.uncounted
    import tensorflow as tf

    infer = roofline.count(tf.function(lambda t: model(t, training=False)), x)
    assert infer.total / 4 == CONV1 + CONV2 + FC1 + FC2


@pytest.mark.slow
def test_flops_agree_with_tensorflows_profiler_op_by_op():
    import _flops
    import roofline

    w = roofline.Workload("unet 32²", "unet", (32, 32, 1), "segmentation", 2, 2)
    model = roofline.build(w)
    x, y = roofline.synthetic_batch(w, 2)
    _, train_step, stop = roofline.engine_train_step(w, model)
    import tensorflow as tf

    graph = train_step.get_concrete_function(*(tf.TensorSpec.from_tensor(t) for t in (x, y, stop))).graph
    profiled = _flops.profiler_flops(graph)
    compared = set()
    for op in graph.get_operations():
        if op.type in _flops.COUNTED and op.name in profiled:
            assert _flops.op_flops(op) == profiled[op.name], op.name
            compared.add(op.type)
    assert compared == {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"}  # transposed convs included
    assert _flops.graph_flops(graph).total > 0


@pytest.mark.slow
def test_flops_count_3d_convolutions_the_profiler_cannot():
    import _flops
    import keras
    import tensorflow as tf

    inputs = keras.Input((8, 8, 8, 2))
    hidden = keras.layers.Conv3D(4, 3, padding="same")(inputs)
    out = keras.layers.Conv3DTranspose(3, 2, strides=2)(hidden)
    model = keras.Model(inputs, out)

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(x))
        return tape.gradient(loss, model.trainable_variables)

    count = _flops.concrete_flops(step, tf.TensorSpec((1, 8, 8, 8, 2)))
    conv = 2 * 8**3 * 4 * 27 * 2  # 8^3 outputs x 4 filters, each 3^3 x 2 inputs
    transposed = 2 * 16**3 * 3 * 8 * 4 / 8  # 16^3 x 3 outputs, each reached by one 2^3 tap of 4 inputs: /8
    assert count.by_type["Conv3D"] == conv + transposed  # the transposed conv's input gradient is a Conv3D
    assert count.by_type["Conv3DBackpropInputV2"] == transposed  # how the transposed conv runs forward
    assert count.by_type["Conv3DBackpropFilterV2"] == conv + transposed  # both filter gradients
    assert not count.uncounted


@pytest.mark.slow
def test_roofline_quick_run_writes_json_and_hides_loaded_speeds(tmp_path):
    import roofline

    out = tmp_path / "r.json"
    args = ["--quick", "--only", "lenet", "--min-time", "0.01", "--steps-per-execution", "2", "--json", str(out)]
    assert roofline.main(args) == 0
    result = json.loads(out.read_text())
    (row,) = result["workloads"]
    assert row["train_mflop_per_image"] == (2 * CONV1 + 3 * (CONV2 + FC1 + FC2)) / 1e6
    assert row["infer_mflop_per_image"] == (CONV1 + CONV2 + FC1 + FC2) / 1e6
    assert row["train_img_s"] > 0 and row["train_fraction_of_peak"] > 0 and row["infer_bN_fraction_of_peak"] > 0
    assert row["steps_per_execution"] == 2 and row["train_spe_img_s"] > 0
    assert result["load"]["verdict"] in ("quiet", "loaded") and result["machine"]["cores"] >= 1
    result["load"].update(verdict="loaded", load_max=9.0)
    loaded = roofline.render_markdown(result)
    assert "**loaded**" in loaded and f"{row['train_img_s']:,.0f}" not in loaded and "| 13.2 |" in loaded
    result["load"].update(verdict="quiet", load_max=1.5)
    quiet = roofline.render_markdown(result)
    assert f"| {row['train_img_s']:,.0f} |" in quiet and "**quiet**" in quiet
    page = tmp_path / "benchmarks.md"
    page.write_text(f"# B\n\n{roofline.BEGIN}\nold\n{roofline.END}\n\n## Next\n")
    roofline.write_docs(result, page)
    text = page.read_text()
    assert "old" not in text and "**quiet**" in text and text.endswith(f"{roofline.END}\n\n## Next\n")
