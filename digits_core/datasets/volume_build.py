"""Building a volume dataset (a data plugin with ``data_layout = "DHWC"``): cases → slabbed LMDB stages.

:func:`~digits_core.datasets.create.run_dataset_job` hands a volume plugin's
job to :class:`VolumeBuild`: the same job life (itemize, errors report and
budget, progress, atomic publish) as the 2-D build, with one case encoded per
task (a case can be hundreds of MB; workers never batch them) and stored by
:class:`~.volumes.VolumeStageWriter`. ``dataset.json`` gets ``"layout": "DHWC"``,
the median spacing and the per-class voxel histogram of every stage.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..interfaces import STAGES
from ..interfaces.records import add_histograms
from .encoder import describe_exception
from .publish import FORMAT_NAME, FORMAT_VERSION
from .reader import ERRORS_FILE
from .volumes import VOLUME_LAYOUT, VolumeStageWriter, VolumeStats, check_volume_pair, median_spacing

_worker_plugin: Any = None


def is_volume_plugin(plugin_cls: Any) -> bool:
    """True for a data plugin class whose entries are volumes (class attribute ``data_layout = "DHWC"``)."""
    return getattr(plugin_cls, "data_layout", None) == VOLUME_LAYOUT


#: Allocations at least this large get their own memory map, returned to the system when freed.
MMAP_THRESHOLD = 1 << 20
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter


def return_freed_volumes() -> bool:
    """Make freed case-sized arrays go back to the system (glibc), so a build's memory stays flat as cases come.

    glibc raises its memory-map threshold each time a mapped block is freed, so after the first case the
    next ones' tens-of-MB arrays come from the heap, which fragments and grows case after case (218 → 267 MB
    from 3 to 6 cases of 300×128×128). A fixed threshold (``mallopt(M_MMAP_THRESHOLD)``) keeps every large
    array in its own map. Returns whether it could be set (False off glibc: nothing changes).
    """
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (OSError, AttributeError):
        return False


def _set_plugin(plugin: Any) -> None:
    global _worker_plugin
    _worker_plugin = plugin
    return_freed_volumes()


def encode_case(entry: Any, plugin: Any = None) -> tuple[Any, Any, str | None]:
    """Encode and check one case with the plugin: ``(volume, label, None)`` or ``(None, None, error)``."""
    try:
        pair = (plugin or _worker_plugin).encode_entry(entry)
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise TypeError("a volume plugin's encode_entry must return one (Volume, label) pair")
        volume, label = check_volume_pair(*pair)
        return volume, label, None
    except Exception as exc:  # noqa: BLE001 - a failed case is reported and skipped
        return None, None, describe_exception(exc)


def _encoded(plugin: Any, entries: list, workers: int) -> Iterator[tuple]:
    if workers <= 1 or len(entries) <= 1:
        for entry in entries:
            yield encode_case(entry, plugin)
        return
    from .pool import main_module_hidden, mp_context  # worker processes only for a stage of several cases

    workers = min(workers, len(entries))
    # Not forked: a pool per stage is started while the progress bars' monitor thread runs, and a forked
    # worker can inherit a lock that thread holds (builds hung with an idle pool under load).
    with main_module_hidden():  # the Pool starts its workers here: the main script must not run in them
        pool = mp_context(allow_fork=False).Pool(workers, initializer=_set_plugin, initargs=(plugin,))
    with pool:
        # at most one case per worker ahead of the writer (``imap`` would queue every finished case here)
        pending: deque = deque()
        for entry in entries:
            if len(pending) >= workers:
                yield pending.popleft().get()
            pending.append(pool.apply_async(encode_case, (entry,)))
        while pending:
            yield pending.popleft().get()


def _build_base():
    from .create import _Build  # create imports this module when it meets a volume plugin: no module-level cycle

    return _Build


class VolumeBuild(_build_base()):  # type: ignore[misc]
    """One volume dataset job (see the module docstring)."""

    def _encode_all(self, plugin, entries: dict[str, list]) -> None:
        return_freed_volumes()
        self.stats: dict[str, VolumeStats] = {}
        for stage in (s for s in STAGES if entries[s]):
            writer = VolumeStageWriter(self.tmp / stage)
            stats = self.stats[stage] = VolumeStats()
            try:
                for entry, (volume, label, error) in zip(
                    entries[stage], _encoded(plugin, entries[stage], self.workers)
                ):
                    if error is not None:
                        self.report.record(stage, entry, error)
                        self.progress.update(stage, 1, 1)
                        self.report.check_budget()
                        continue
                    stats.add(writer.append(volume, label), label)
                    self.progress.update(stage, 1, 0)
            finally:
                writer.close()
            self.stage_info[stage] = stats.info()
        cases = [s for st in self.stats.values() for s in st.shapes]
        if cases:
            first = next(st for st in self.stats.values() if st.shapes)
            self.layout.layout = (VOLUME_LAYOUT, sorted(first.dtypes)[0], cases[0][3], sorted(first.label_dtypes)[0])

    def _info(self, userdata: dict, timing: dict) -> dict:
        _, dtype, channels, label_dtype = self.layout.layout
        spacings = [sp for st in self.stats.values() for sp in st.spacings]
        total = None
        for info in self.stage_info.values():
            total = add_histograms(total, np.asarray(info["label_histogram"], np.int64))
        histogram = total.tolist() if total is not None else []
        class_labels = userdata.get("class_labels") or [str(i) for i in range(len(histogram))]
        return {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "id": self.job.id,
            "name": self.job.name,
            "plugin_id": self.plugin_id,
            "plugin_version": self._plugin_version(),
            "created": time.time(),
            "layout": VOLUME_LAYOUT,
            "feature": {"shape": [None, None, None, channels], "dtype": dtype, "layout": VOLUME_LAYOUT},
            "label": {"kind": "volume", "dtype": label_dtype, "shape": [None, None, None]},
            "median_spacing": median_spacing(spacings),
            "label_histogram": histogram,
            "stages": {s: self.stage_info[s] for s in STAGES if s in self.stage_info},
            "userdata": userdata,
            "class_labels": class_labels,
            "num_classes": max(len(class_labels), len(histogram)),
            "color_palette": userdata.get("color_palette"),
            "mean": None,
            "errors": {
                "skipped": self.report.count,
                "max_errors": self.max_errors,
                "report": f"../{ERRORS_FILE}" if self.report.count else None,
            },
            "workers": self.workers,
            "timing": timing,
        }
