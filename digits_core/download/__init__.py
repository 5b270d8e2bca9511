"""``digits download``: the standard datasets (MNIST, CIFAR-10, CIFAR-100) as class folders.

Example::

    from digits_core.download import download_dataset
    result = download_dataset("mnist", "~/data/mnist")
    print(result.next_steps())

See :func:`download_dataset` for the layout written, resume, checksums and
``source`` (local copies and mirrors).
"""

from __future__ import annotations

from .api import DownloadResult, TreeSummary, download_dataset
from .errors import ChecksumError, DownloadError, NetworkError
from .specs import DATASETS, DatasetSpec, RemoteFile

__all__ = [
    "download_dataset",
    "DownloadResult",
    "TreeSummary",
    "DownloadError",
    "NetworkError",
    "ChecksumError",
    "DATASETS",
    "DatasetSpec",
    "RemoteFile",
]
