"""Active learning: unlabelled pools, uncertainty strategies, proposals, review records, rounds and simulation.

- :mod:`~digits_core.labeling.pool`: the pool record (a job of kind ``pool`` with ``pool.json``), the review
  queue, claims and label versions with an optimistic version check;
- :mod:`~digits_core.labeling.sources`: a pool from a folder of images;
- :mod:`~digits_core.labeling.strategies`: ``random``, ``entropy``, ``variance`` (MC-dropout), ``tta``, each
  aggregated per case by the mean or the mean of its ``top_fraction`` most uncertain pixels;
- :mod:`~digits_core.labeling.scoring`: scoring in batches, proposals;
- :mod:`~digits_core.labeling.rounds`: a round (score, propose, retrain on accepted labels);
- :mod:`~digits_core.labeling.simulate`: strategies replayed on a labelled dataset.

TensorFlow is imported only when a model is scored or trained.
"""

from __future__ import annotations

from .pool import (
    ACCEPTED,
    IN_REVIEW,
    PROPOSED,
    REJECTED,
    STATES,
    UNLABELLED,
    ClaimedError,
    Pool,
    PoolError,
    StaleLabelError,
    create_pool,
    list_pools,
    load_pool,
)
from .rounds import RoundResult, round_history, run_round
from .scoring import ScoreResult, propose, score_pool
from .simulate import SimulationResult, simulate
from .sources import create_folder_pool
from .strategies import DEFAULT_TOP_FRACTION, STRATEGIES, check_top_fraction

__all__ = [
    "ACCEPTED",
    "DEFAULT_TOP_FRACTION",
    "IN_REVIEW",
    "PROPOSED",
    "REJECTED",
    "STATES",
    "STRATEGIES",
    "UNLABELLED",
    "ClaimedError",
    "Pool",
    "PoolError",
    "RoundResult",
    "ScoreResult",
    "SimulationResult",
    "StaleLabelError",
    "check_top_fraction",
    "create_folder_pool",
    "create_pool",
    "list_pools",
    "load_pool",
    "propose",
    "round_history",
    "run_round",
    "score_pool",
    "simulate",
]
