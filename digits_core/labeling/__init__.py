"""Active learning: unlabelled pools, uncertainty strategies, proposals, review records, rounds and simulation.

- :mod:`~digits_core.labeling.pool`: the pool record (a job of kind ``pool`` with ``pool.json``), the review
  queue, claims and label versions with an optimistic version check.
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

__all__ = [
    "ACCEPTED",
    "IN_REVIEW",
    "PROPOSED",
    "REJECTED",
    "STATES",
    "UNLABELLED",
    "ClaimedError",
    "Pool",
    "PoolError",
    "StaleLabelError",
    "create_pool",
    "list_pools",
    "load_pool",
]
