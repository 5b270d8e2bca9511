"""``--mlflow URI`` of ``digits train`` and ``digits tune``: the run's MLflow tracking server.

The flag sets ``$MLFLOW_TRACKING_URI`` for this command, so every job it trains (one model, each point
of a grid sweep, each Ray Tune trial on a cluster this command starts) is logged there
(:mod:`digits_core.engine.mlflow_log`). ``digits evaluate --mlflow`` passes its URI to ``evaluate()``.
"""

from __future__ import annotations

import argparse
import os

from ..engine.mlflow_log import URI_ENV


def add_mlflow_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--mlflow URI`` to a command that trains."""
    parser.add_argument(
        "--mlflow",
        metavar="URI",
        default=None,
        help="log every run to this MLflow tracking server: options, per-epoch metrics, the model's files "
        "(default: $MLFLOW_TRACKING_URI; needs digits-core[mlflow])",
    )


def use_mlflow(args: argparse.Namespace) -> None:
    """Make ``--mlflow`` this command's tracking URI (the environment its runs and trial workers read)."""
    uri = (getattr(args, "mlflow", None) or "").strip()
    if uri:
        os.environ[URI_ENV] = uri
