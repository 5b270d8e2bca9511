"""Engine building blocks on arrays: LR policies, options, solvers, networks, custom files,
preprocessing, augmentation. Real TensorFlow/Keras, no datasets."""

from __future__ import annotations

import json
import math
import textwrap

import numpy as np
import pytest

from digits_core.engine.lr_policies import POLICIES, learning_rate_at, lr_schedule_preview, resolve_policy
from digits_core.engine.options import SOLVERS, TrainingOptions
from digits_core.errors import FormValidationError, TrainingError


def formula(policy, it, lr=0.1):
    """The Caffe/DIGITS formulas written out independently (it in percent)."""
    p = resolve_policy(policy)
    if policy == "fixed":
        return lr
    if policy == "step":
        return lr * 0.1 ** math.floor(it / 33)
    if policy == "multistep":
        return lr * 0.5 ** sum(it >= v for v in (50, 85))
    if policy == "exp":
        return lr * 0.95**it
    if policy == "inv":
        return lr * (1 + 0.1 * it) ** -0.5
    if policy == "poly":
        return lr * (1 - it / 100) ** 3
    if policy == "sigmoid":
        return lr / (1 + math.exp(0.1 * (it - 50)))  # DIGITS 6: a decay with the default gamma
    raise AssertionError(p)


@pytest.mark.slow  # imports TensorFlow
@pytest.mark.parametrize("policy", POLICIES)
def test_lr_policies_match_formulas_numpy_and_keras(policy):
    from digits_core.engine.lr_policies import keras_schedule

    total = 200
    schedule = keras_schedule(0.1, resolve_policy(policy), total)
    for step in (0, 1, 33, 65, 66, 67, 100, 150, 170, 199, 200):
        it = 100 * step / total
        expected = formula(policy, it)
        assert learning_rate_at(np.float64(it), 0.1, resolve_policy(policy)) == pytest.approx(expected, rel=1e-9)
        assert float(schedule(step)) == pytest.approx(expected, rel=1e-5, abs=1e-9)


@pytest.mark.slow  # imports TensorFlow
def test_lr_warmup_rises_linearly_then_follows_the_policy():
    from digits_core.engine.lr_policies import keras_schedule

    schedule = keras_schedule(0.004, resolve_policy("multistep", step_values="75,92", gamma=0.1), 100, warmup_steps=10)
    rates = [float(schedule(step)) for step in (0, 4, 9, 10, 50, 80)]
    assert rates == pytest.approx([0.0004, 0.002, 0.004, 0.004, 0.004, 0.0004], rel=1e-5)
    assert schedule.get_config()["warmup_steps"] == 10


def test_lr_policy_parameters_and_preview(tmp_path):
    rows = lr_schedule_preview(
        100,
        learning_rate=1.0,
        lr_policy="multistep",
        step_values="20, 40",
        lr_gamma=None,
        gamma=0.1,
        points=101,
        plot=str(tmp_path / "lr.png"),
    )
    assert [r["lr"] for r in rows if r["step"] in (19, 20, 39, 40)] == pytest.approx([1, 0.1, 0.1, 0.01])
    assert (tmp_path / "lr.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(FormValidationError, match="lr_policy"):
        resolve_policy("cosine")
    with pytest.raises(FormValidationError, match="lr_step_values"):
        resolve_policy("multistep", step_values="a,b")


def test_options_validation_names_fields():
    with pytest.raises(FormValidationError) as info:
        TrainingOptions.from_kwargs(epochs=0, solver="lbfgs", learning_rate=-1, aug_flip="sideways", bogus=1)
    assert set(info.value.errors) >= {"epochs", "solver", "learning_rate", "aug_flip", "bogus"}
    opts = TrainingOptions.from_kwargs(epochs="3", validation_interval=0.5, class_weights="1,2", aug_rotation=5)
    assert opts.epochs == 3 and opts.class_weights == [1.0, 2.0] and opts.augmentation.rotation == 5.0
    assert TrainingOptions.from_dict(opts.to_dict()) == opts


#: solver -> (steps, ceiling of last/first loss). Known-good ratios (Keras 3.x, CPU): sgd 0.012,
#: momentum 0.0006, nesterov 0.0001, adam/adamw 0.456, rmsprop 0.395, adagrad 0.404 after 60 steps;
#: adadelta (steps of ~sqrt(epsilon) at first) 0.713 after 300. Ceilings leave about 2x margin and still
#: tell the solvers apart: momentum ignored would give sgd's 0.012, Nesterov off momentum's 0.0006.
SOLVER_LOSS_RATIO = {
    "sgd": (60, 0.03),
    "momentum": (60, 0.005),
    "nesterov": (60, 0.0004),
    "adam": (60, 0.55),
    "adamw": (60, 0.55),
    "rmsprop": (60, 0.5),
    "adagrad": (60, 0.5),
    "adadelta": (300, 0.8),
}


@pytest.mark.slow  # imports TensorFlow
@pytest.mark.parametrize("solver", SOLVERS)
def test_each_solver_reduces_loss(solver):
    import keras
    import tensorflow as tf

    from digits_core.engine.solvers import build_optimizer

    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    y = x @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    lr = {"adadelta": 1.0, "adagrad": 0.1}.get(solver, 0.02)
    opt = build_optimizer(solver, lr, momentum=0.9, weight_decay=1e-4)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    first = float(step())
    steps, ceiling = SOLVER_LOSS_RATIO[solver]
    for _ in range(steps):
        last = float(step())
    assert last / first < ceiling, (solver, first, last, last / first)


@pytest.mark.slow  # imports TensorFlow
@pytest.mark.parametrize(
    "name,shape,outputs,expected",
    [
        ("lenet", (8, 8, 1), 10, (10,)),
        ("lenet", (28, 28, 1), 10, (10,)),
        ("alexnet", (32, 32, 3), 5, (5,)),
        ("googlenet", (32, 32, 3), 7, (7,)),
        ("unet", (60, 44, 1), 3, (60, 44, 3)),
        ("fcn", (36, 36, 1), 2, (36, 36, 2)),
        ("regression", (16, 16, 1), 2, (2,)),
    ],
)
def test_builtin_networks_adapt_to_input(name, shape, outputs, expected):
    from digits_core.engine.networks import resolve_network

    model = resolve_network(name).build(shape, outputs)
    assert tuple(model.output_shape[1:]) == expected
    out = model(np.zeros((2, *shape), np.float32))
    assert tuple(out.shape) == (2, *expected)
    if name == "unet":
        assert model.count_params() >= 200_000


def test_unknown_network_lists_choices():
    from digits_core.engine.networks import resolve_network

    with pytest.raises(TrainingError, match="lenet.*unet"):
        resolve_network("resnet9000")


def _write(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


@pytest.mark.slow  # imports TensorFlow
def test_custom_network_errors_point_at_user_line(tmp_path):
    from digits_core.engine.networks import resolve_network
    from digits_core.engine.networks.custom import call_builder

    bad_syntax = _write(
        tmp_path,
        "syntax.py",
        """\
        import keras
        def build_model(input_shape, num_outputs, **params)
            return None
        """,
    )
    with pytest.raises(TrainingError) as info:
        resolve_network(bad_syntax)
    assert f"{bad_syntax}:2:" in str(info.value) and "SyntaxError" in str(info.value)

    bad_import = _write(
        tmp_path,
        "imp.py",
        """\
        import keras
        WIDTH = 10 / 0
        """,
    )
    with pytest.raises(TrainingError, match=r"imp\.py:2: .*ZeroDivisionError.*\n.*WIDTH = 10 / 0"):
        resolve_network(bad_import)

    missing = _write(tmp_path, "missing.py", "x = 1\n")
    with pytest.raises(TrainingError, match="defines no function build_model"):
        resolve_network(missing)

    raising = _write(
        tmp_path,
        "raising.py",
        """\
        import keras

        def build_model(input_shape, num_outputs, **params):
            inputs = keras.Input(input_shape)
            x = keras.layers.Dense(num_outputs)(inputs)
            return keras.Model(inputs, x, name=params["missing_param"])
        """,
    )
    spec = resolve_network(raising)
    with pytest.raises(TrainingError) as info:
        call_builder(spec.build, (8, 8, 1), 3, {}, origin=spec.name, path=spec.path)
    text = str(info.value)
    assert f"{raising}:6:" in text and "KeyError" in text and 'params["missing_param"]' in text

    not_model = _write(tmp_path, "notmodel.py", "def build_model(input_shape, num_outputs, **params):\n    return 42\n")
    spec = resolve_network(not_model)
    with pytest.raises(TrainingError, match="returned int, not a keras.Model"):
        call_builder(spec.build, (8, 8, 1), 3, {}, origin=spec.name, path=spec.path)


@pytest.mark.slow  # imports TensorFlow
def test_preprocessing_numpy_and_tf_agree(tmp_path):
    from digits_core.engine.preprocessing import Preprocessing, tf_center_crop

    rng = np.random.default_rng(0)
    mean = rng.uniform(0, 255, (10, 12, 3)).astype(np.float32)
    batch = rng.integers(0, 255, (4, 10, 12, 3)).astype(np.uint8)
    for mode in ("none", "image", "pixel"):
        prep = Preprocessing(mode, mean, 1 / 255, 6, (10, 12, 3))
        np_out = prep.apply(batch)
        tf_out = tf_center_crop(prep.tf_normalize(batch), 6).numpy()
        np.testing.assert_allclose(np_out, tf_out, rtol=1e-6, atol=1e-6)
        subtract = {"none": 0, "image": mean, "pixel": mean.mean(axis=(0, 1))}[mode]
        np.testing.assert_allclose(np_out, ((batch - subtract) / 255)[:, 2:8, 3:9], rtol=1e-5, atol=1e-6)
        info = prep.save(tmp_path)
        back = Preprocessing.from_dict(info, tmp_path)
        np.testing.assert_allclose(back.apply(batch), np_out)
    assert prep.input_shape == (6, 6, 3)


@pytest.mark.slow  # imports TensorFlow
def test_augmentation_keeps_masks_aligned():
    import tensorflow as tf

    from digits_core.engine.augmentation import augment_batch
    from digits_core.engine.options import Augmentation

    rng = np.random.default_rng(1)
    masks = np.zeros((16, 40, 40), np.int32)
    for i in range(16):  # random rectangles and a class-2 blob, asymmetric on purpose
        t, l = rng.integers(0, 25, 2)
        masks[i, t : t + 12, l : l + 7] = 1
        masks[i, 30:36, 2:12] = 2
    images = tf.constant(masks[..., None].astype(np.float32) * 100.0)

    exact = Augmentation(flip="both", rot90=True)
    out_x, out_y = augment_batch(
        images,
        tf.constant(masks),
        tf.constant([3, 4], tf.int64),
        exact,
        out_hw=(32, 32),
        is_mask=True,
        random_crop=True,
    )
    assert out_x.shape == (16, 32, 32, 1) and out_y.shape == (16, 32, 32)
    np.testing.assert_array_equal(np.round(out_x.numpy()[..., 0] / 100).astype(np.int32), out_y.numpy())
    assert not np.array_equal(out_y.numpy(), masks[:, 4:36, 4:36])  # something did change

    free = Augmentation(rotation=30, scale=0.2, flip="horizontal")
    out_x, out_y = augment_batch(
        images,
        tf.constant(masks),
        tf.constant([5, 6], tf.int64),
        free,
        out_hw=(40, 40),
        is_mask=True,
        random_crop=False,
    )
    agree = np.mean(np.round(out_x.numpy()[..., 0] / 100).astype(np.int32) == out_y.numpy())
    assert agree > 0.97
    assert set(np.unique(out_y.numpy())) <= {0, 1, 2}

    # photometric changes leave masks alone; same seed, same result
    photo = Augmentation(noise=0.1, contrast=0.3, brightness=0.2)
    a = augment_batch(
        images,
        tf.constant(masks),
        tf.constant([7, 8], tf.int64),
        photo,
        out_hw=(40, 40),
        is_mask=True,
        random_crop=False,
    )
    b = augment_batch(
        images,
        tf.constant(masks),
        tf.constant([7, 8], tf.int64),
        photo,
        out_hw=(40, 40),
        is_mask=True,
        random_crop=False,
    )
    np.testing.assert_array_equal(a[1].numpy(), masks)
    np.testing.assert_array_equal(a[0].numpy(), b[0].numpy())
    assert not np.allclose(a[0].numpy(), images.numpy())


@pytest.mark.slow  # imports TensorFlow
def test_hue_saturation_on_rgb():
    import tensorflow as tf

    from digits_core.engine.augmentation import augment_batch, check_augmentation
    from digits_core.engine.options import Augmentation

    aug = Augmentation(hue=0.2, saturation=0.5)
    with pytest.raises(FormValidationError, match="aug_hue"):
        check_augmentation(aug, (8, 8), 1)
    x = tf.constant(np.random.default_rng(0).uniform(0, 1, (4, 8, 8, 3)).astype(np.float32))
    out, _ = augment_batch(
        x, tf.zeros([4], tf.int32), tf.constant([1, 2], tf.int64), aug, out_hw=(8, 8), is_mask=False, random_crop=False
    )
    assert out.shape == x.shape and not np.allclose(out.numpy(), x.numpy())


def test_auto_class_weights_and_val_summary():
    from digits_core.engine.losses import auto_class_weights, summarize_val

    weights = auto_class_weights(np.array([0, 0, 0, 1, 2, 2]), 4)
    assert weights[0] < weights[2] < weights[1] and weights[3] == 1.0
    out = summarize_val(
        "segmentation",
        {
            "count": 2,
            "loss_sum": 1.0,
            "tp": np.array([90.0, 8.0]),
            "fp": np.array([2.0, 2.0]),
            "fn": np.array([2.0, 0.0]),
            "pixels": 100,
        },
    )
    assert out["val_dice"] == pytest.approx(16 / 18) and out["val_iou"] == pytest.approx(0.8)
    assert out["val_accuracy"] == pytest.approx(0.98) and out["val_loss"] == 0.5


def test_plugin_networks_through_the_hook(capsys):
    from digits_core import hookimpl, registry
    from digits_core.cli import main
    from digits_core.engine.networks import resolve_network

    def tiny(input_shape, num_outputs, **params):
        """A tiny plugin network."""

    class Plugin:
        @hookimpl
        def digits_register_networks(self):
            return {"tiny-net": tiny}

    plugin = Plugin()
    registry.register(plugin)
    try:
        spec = resolve_network("tiny-net")
        assert spec.source == "plugin" and spec.build is tiny
        assert main(["networks", "--json"]) == 0
        listed = {n["name"]: n for n in json.loads(capsys.readouterr().out)}
        assert listed["tiny-net"]["description"] == "A tiny plugin network." and "lenet" in listed
    finally:
        registry.unregister(plugin)
    with pytest.raises(TrainingError):
        resolve_network("tiny-net")


def test_a_runs_plan_is_frozen_and_its_fields_read_through_the_state(tmp_path):
    import dataclasses

    from digits_core.engine.setup import RunPlan, RunState

    plan = RunPlan(job=None, reader=None, spec=None, opts=TrainingOptions(), strat=None, folder=tmp_path)
    state = RunState(plan, task=None)
    assert state.folder == tmp_path and state.opts is plan.opts and state.resume_from is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.folder = tmp_path / "other"
    with pytest.raises(AttributeError):
        state.opts = TrainingOptions(epochs=2)  # the plan is changed only by making a new one
    state.total_steps = 30  # the live part stays writable
