"""What the active-learning tests share: pool and model records, and the ``top_fraction`` reference formula.

A folder pool of three small grey images under ``tmp_path/roots/unlabelled`` and model job records with
only what the run checks read (their ``model.json``), as the JSON API and the web forms see them; the
aggregation written out independently of the product's, so the tests compare the product with it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image


def three_image_pool(tmp_path: Path):
    """A folder pool ``hearts`` of three 8×10 grey PNGs; returns ``(pool, jobs_dir, folder)``."""
    from digits_core.labeling.sources import create_folder_pool

    data = tmp_path / "roots" / "unlabelled"
    data.mkdir(parents=True)
    for i in range(3):
        Image.fromarray(np.full((8, 10), 40 * i, np.uint8), mode="L").save(data / f"{i}.png")
    jobs = tmp_path / "jobs"
    return create_folder_pool("hearts", data, jobs_dir=jobs), jobs, data


def model_record(jobs: Path, network: str, record: dict | None):
    """A model job record of ``network``; ``record`` (e.g. ``{"task": "segmentation"}``) as its model.json,
    none for a model that never trained."""
    from digits_core.jobs.model import write_model_record
    from digits_core.submit.records import create_job_record

    job = create_job_record("model", network, jobs_dir=jobs)
    if record is not None:
        write_model_record(job.path, {"job_id": job.id, **record})
    return job


def top_fraction_reference(per_pixel_map: np.ndarray, fraction: float) -> np.ndarray:
    """Per case of ``[N, ...]`` uncertainties: the mean of its ``max(1, round(fraction * pixels))`` largest."""
    per_pixel = per_pixel_map.reshape(len(per_pixel_map), -1)
    k = max(1, int(round(fraction * per_pixel.shape[1])))
    return np.sort(per_pixel, axis=1)[:, -k:].mean(axis=1)
