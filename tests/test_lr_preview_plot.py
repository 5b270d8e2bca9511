"""``digits lr-preview --plot`` draws the schedule the optimizer applies: dense, drops as vertical steps."""

from __future__ import annotations

import numpy as np
from PIL import Image

from digits_core.cli import main as digits
from digits_core.engine.lr_policies import dense_schedule, learning_rate_at, resolve_policy

LINE = (31, 119, 180)


def _line_rows_per_column(path):
    pixels = np.asarray(Image.open(path).convert("RGB")).astype(int)
    blue = np.abs(pixels - np.array(LINE)).sum(axis=2) < 60
    return {x: np.flatnonzero(blue[:, x]) for x in range(blue.shape[1]) if blue[:, x].any()}


def test_multistep_drops_are_vertical_steps_not_ramps(tmp_path, capsys):
    plot = tmp_path / "lr.png"
    assert (
        digits(
            [
                "lr-preview",
                "--lr-policy",
                "multistep",
                "--lr-step-values",
                "50,85",
                "--lr-gamma",
                "0.5",
                "--epochs",
                "30",
                "--steps-per-epoch",
                "100",
                "--plot",
                str(plot),
            ]
        )
        == 0
    )
    assert "plot written" in capsys.readouterr().out
    columns = _line_rows_per_column(plot)
    levels = sorted({int(np.median(rows)) for rows in columns.values() if len(rows) <= 3})
    # three flat levels (1, 0.5, 0.25 of the base rate) ...
    assert len(levels) >= 3
    high, low = min(levels), max(levels)
    # ... joined by two vertical drops: only a few columns hold pixels between the levels
    between = [
        x
        for x, rows in columns.items()
        if ((rows > high + 3) & (rows < low - 3)).any() and not any(abs(rows.mean() - lv) < 3 for lv in levels)
    ]
    ramp_free = [x for x, rows in columns.items() if len(rows) > 6]  # a vertical segment spans many rows
    assert len(ramp_free) <= 8 and len(between) <= 8


def test_dense_schedule_evaluates_every_step_of_short_runs():
    policy = resolve_policy("multistep", step_values="50")
    rows = dense_schedule(200, 0.1, policy)
    assert [r["step"] for r in rows] == list(range(201))
    np.testing.assert_allclose([r["lr"] for r in rows], learning_rate_at(np.arange(201) / 2.0, 0.1, policy))
    assert rows[99]["lr"] == 0.1 and rows[100]["lr"] == rows[99]["lr"] * policy["gamma"]
    assert len(dense_schedule(10**7, 0.1, policy)) <= 4096
