"""``simulate``: active-learning rounds replayed per strategy and seed on a real (tiny) labelled dataset."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest

from digits_core import registry

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    from synthetic_plugins import SyntheticLV, SyntheticShapes

    from digits_core.datasets import create_dataset

    jobs = tmp_path_factory.mktemp("sim") / "jobs"
    registry.register(SyntheticLV)
    registry.register(SyntheticShapes)
    try:
        lv = create_dataset("synthetic-lv", {"count": 20, "val_count": 4, "size": 16}, workers=1, jobs_dir=jobs)
        shapes = create_dataset(
            "synthetic-shapes", {"count": 8, "val_count": 4, "size": 8, "classes": 2}, workers=1, jobs_dir=jobs
        )
    finally:
        registry.unregister(SyntheticLV)
        registry.unregister(SyntheticShapes)
    return jobs, lv, shapes


def test_simulation_curves_per_strategy_and_seed(datasets, tmp_path):
    from digits_core.labeling.simulate import save, simulate

    jobs, lv, _ = datasets
    lines = []
    result = simulate(
        lv.id, strategies=["entropy"], seeds=(0, 1, 2), initial=0.1, step=0.1, rounds=2, epochs=1, round_epochs=1,
        full_epochs=1, batch_size=4, network_params={"filters": 2, "depth": 2, "dropout": 0.1}, jobs_dir=jobs,
        progress=lines.append, min_steps=0,
    )  # fmt: skip
    assert list(result.curves) == ["random", "entropy"]  # random is always the baseline
    assert np.allclose(result.fractions, [0.1, 0.2, 0.3])
    for runs in result.curves.values():
        assert np.asarray(runs).shape == (3, 3) and all(0 <= d <= 1 for run in runs for d in run)
    for seed in range(3):  # the same seed: the same initial images and weights for every strategy
        assert result.curves["random"][seed][0] == pytest.approx(result.curves["entropy"][seed][0], abs=1e-6)
    summary = result.summary()
    assert summary["random"]["std"][0] == pytest.approx(np.std([r[0] for r in result.curves["random"]]))
    assert len(lines) == 3 * 2 * 2 + 1 and 0 <= result.full_dice <= 1
    table = result.table()
    assert "full-data val Dice" in table and "20.0%" in table and "±" in table
    data, chart = save(result, tmp_path / "out")
    saved = json.loads(data.read_text())
    assert saved["curves"] == result.curves and saved["settings"]["train_images"] == 20
    svg = chart.read_text()
    assert svg.startswith("<svg") and svg.count("<polyline") == 2 and "full data" in svg


def test_simulation_refuses_what_it_cannot_replay(datasets):
    from digits_core.labeling.simulate import SimulationError, simulate
    from digits_core.labeling.strategies import StrategyError

    jobs, lv, shapes = datasets
    with pytest.raises(SimulationError, match="at least 3 different seeds"):
        simulate(lv.id, seeds=(0, 1), jobs_dir=jobs)
    with pytest.raises(SimulationError, match=f"Dataset {shapes.id} holds class labels; the simulation needs"):
        simulate(shapes.id, jobs_dir=jobs)
    with pytest.raises(SimulationError, match="20 train images: 2 initial \\+ 10 rounds of 2 do not fit"):
        simulate(lv.id, initial=0.1, step=0.1, rounds=10, jobs_dir=jobs)
    with pytest.raises(StrategyError, match="Unknown strategy"):
        simulate(lv.id, strategies=["oracle"], jobs_dir=jobs)


def test_a_short_fit_runs_its_minimum_steps_with_batchnorm_fitted_to_them(monkeypatch):
    """8 labelled images at batch 16 are one step an epoch: a round's 2 epochs would be 2 steps, and Keras's
    BatchNorm momentum (0.99) would keep the initial statistics (the simulation's Dice stayed at 0.03, the
    network's output at chance in inference mode, for every strategy)."""
    from digits_core.engine.batchnorm import momentum_for
    from digits_core.engine.networks import resolve_network
    from digits_core.labeling.simulate import _Trainer, cosine_rate, round_rate

    simulation = importlib.import_module("digits_core.labeling.simulate")  # the package exports simulate()

    rates: list[tuple[int, int, float]] = []

    def spy(base, epoch, epochs):  # the schedule fit() asks, epoch by epoch
        rates.append((epoch, epochs, round_rate(base, epoch, epochs)))
        return rates[-1][2]

    monkeypatch.setattr(simulation, "round_rate", spy)

    spec = resolve_network("unet")
    x = np.random.default_rng(0).random((8, 16, 16, 1)).astype(np.float32)
    y = (x[..., 0] > 0.5).astype(np.int32)
    trainer = _Trainer(lambda: spec.build((16, 16, 1), 2, filters=2, depth=2, dropout=0.1), 3e-3, 16, 0, 12)
    trainer.restart()  # before every strategy: the rate must survive it (it once zeroed the rate with the moments)
    assert float(trainer.model.optimizer.learning_rate) == pytest.approx(3e-3)
    trainer.fit(x, y, 2)
    assert int(trainer.model.optimizer.iterations) == 12
    # the rate ramped up over the first 10 % of the 12 epochs (2), then decayed along the cosine: the last
    # epoch ran at 1.7 % of it
    assert [(e, n) for e, n, _ in rates] == [(e, 12) for e in range(12)]
    assert rates[0][2] == pytest.approx(1.5e-3) and rates[1][2] == pytest.approx(cosine_rate(3e-3, 1, 12))
    assert float(trainer.model.optimizer.learning_rate) == pytest.approx(cosine_rate(3e-3, 11, 12))
    assert cosine_rate(3e-3, 0, 12) == pytest.approx(3e-3) and cosine_rate(3e-3, 11, 12) < 6e-5
    # a 67-epoch round (48 images at batch 16, 200 steps) ramps over 7 epochs, from a seventh of the rate
    assert round_rate(3e-3, 0, 67) == pytest.approx(3e-3 * 0.5 * (1 + np.cos(0)) / 7)
    assert round_rate(3e-3, 6, 67) == pytest.approx(cosine_rate(3e-3, 6, 67))
    assert not np.allclose(trainer.model.variables[0].numpy(), trainer.initial[0])  # it learned
    trainer.restart()
    assert float(trainer.model.optimizer.learning_rate) == pytest.approx(3e-3)
    assert int(trainer.model.optimizer.iterations) == 0
    momenta = {layer.momentum for layer in trainer.model._flatten_layers() if hasattr(layer, "moving_variance")}
    assert momenta == {momentum_for(1)}
