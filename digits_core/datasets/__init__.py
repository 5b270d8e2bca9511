"""Datasets: build them from any data plugin, store them in LMDB, read them back in batches.

::

    from digits_core.datasets import create_dataset, open_dataset

    job = create_dataset("image-classification", {"folder": "/data/train"}, name="mnist", workers=2)
    ds = open_dataset(job.id)
    features, labels = ds.read_batch("train", 0, 64)   # [64, H, W, C], [64]

Modules: :mod:`.records` (one record's bytes), :mod:`.storage` (LMDB per
stage), :mod:`.reader` (:class:`Dataset`), :mod:`.create` (the job, and a
map of the modules that build a dataset), :mod:`.progress`
(``progress.json``), :mod:`.explore` (contact sheets).
:func:`channels_first_problem` is the layout check ``digits plugin check``
shares.
The on-disk format is described in ``docs/formats.md``. Nothing here imports
TensorFlow.
"""

from __future__ import annotations

from ..interfaces.images import EncodedImage, RecordError
from .layout import channels_first_problem
from .reader import Dataset, open_dataset


def __getattr__(name: str):
    # create pulls in multiprocessing machinery; import it on first use.
    if name in ("create_dataset", "create_dataset_job", "run_dataset_job", "parse_max_errors"):
        from . import create

        return getattr(create, name)
    raise AttributeError(f"module 'digits_core.datasets' has no attribute {name!r}")


__all__ = [
    "create_dataset",
    "create_dataset_job",
    "run_dataset_job",
    "open_dataset",
    "Dataset",
    "EncodedImage",
    "RecordError",
    "parse_max_errors",
    "channels_first_problem",
]
