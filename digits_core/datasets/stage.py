"""Encoding one stage (train, val or test) of a dataset job into its LMDB environment.

:class:`StageEncoder` cuts the stage's entries into chunks
(:class:`ChunkPlan`), has a pool encode them, and takes the results in
order: it decides the dataset layout by a vote of the records of the first
:data:`AGREEMENT_SAMPLE` entries (:class:`LayoutState`), skips and reports entries that failed or differ,
adds up label histograms, encodings and mean-image sums, and appends the
good records to the stage's :class:`~.storage.StageWriter`.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from pathlib import Path

import numpy as np

from ..interfaces import records as rec
from .encoder import ChunkResult, Outcome, UniformChunk
from .layout import agree_on_layout, check_channels_last, layout_mismatch
from .options import MAX_CHUNK
from .progress import ProgressReporter
from .report import ErrorsReport
from .storage import StageWriter

#: At most this many images without decoded pixels (pass-through bytes) are decoded for the mean.
MEAN_SAMPLE_LIMIT = 128
#: Entries in the first chunks of a stage, before record sizes are known.
FIRST_CHUNK = 64
#: The dataset layout is the one most records of (at least) this many first entries share.
AGREEMENT_SAMPLE = 64
#: Later chunks hold about this many bytes of records (between MIN_CHUNK and the job's chunk size).
CHUNK_BYTES = 8 << 20
MIN_CHUNK = 4


def _entries(result: ChunkResult) -> int:
    outcomes = result.outcomes
    return len(outcomes.per_entry) if isinstance(outcomes, UniformChunk) else len(outcomes)


class ChunkPlan:
    """Cuts a stage's entries into chunks.

    The first chunks hold :data:`FIRST_CHUNK` entries; once record sizes are
    known, chunks hold about :data:`CHUNK_BYTES` of records (at most
    ``max_size`` entries), so big images never pile up in pipes or memory.
    Iterating is lazy: each chunk is sized from what :meth:`observe` saw so far.
    """

    def __init__(self, items: list, max_size: int = MAX_CHUNK):
        self.items = items
        self.max_size = max_size
        self.size = min(max_size, FIRST_CHUNK)
        self._bytes = 0
        self._entries = 0

    def observe(self, entries: int, nbytes: int) -> None:
        """Account for ``entries`` encoded into ``nbytes`` of records."""
        self._entries += entries
        self._bytes += nbytes

    def __iter__(self):
        start, n = 0, len(self.items)
        while start < n:
            if self._entries:
                per_entry = max(1.0, self._bytes / self._entries)
                self.size = int(min(self.max_size, max(MIN_CHUNK, CHUNK_BYTES // per_entry)))
            stop = min(n, start + self.size)
            yield start, self.items[start:stop]
            start = stop


class LayoutState:
    """The dataset's layout, shared by its stages; decided once, by agreement of the first results."""

    def __init__(self, plugin_id: str):
        self.plugin_id = plugin_id
        self.layout: tuple | None = None

    def decide(self, metas) -> None:
        """Set the layout from ``metas`` (records that encoded) unless it is already set.

        Raises:
            DatasetError: The agreed feature shape looks channels-first.
        """
        if self.layout is None:
            layout = agree_on_layout(metas)
            if layout is not None:
                check_channels_last(layout[1], self.plugin_id)
                self.layout = layout


class StageEncoder:
    """Encodes and writes one stage.

    Args:
        stage: ``"train"``, ``"val"`` or ``"test"``.
        items: The stage's entries.
        folder: The stage's LMDB folder (created).
        layout: The job's :class:`LayoutState`.
        report: The job's errors report.
        progress: The job's progress reporter.
        mean_sums: The job's mean-image sums (layout -> ``[sum, count]``), added to.
        max_chunk: Largest chunk, in entries.
    """

    def __init__(
        self,
        stage: str,
        items: list,
        folder: Path,
        *,
        layout: LayoutState,
        report: ErrorsReport,
        progress: ProgressReporter,
        mean_sums: dict,
        max_chunk: int,
    ):
        self.stage = stage
        self.items = items
        self.folder = folder
        self.layout = layout
        self.report = report
        self.progress = progress
        self.mean_sums = mean_sums
        self.plan = ChunkPlan(items, max_chunk)
        self.mean_every = max(1, math.ceil(len(items) / MEAN_SAMPLE_LIMIT)) if stage == "train" else 0
        self.encodings: Counter = Counter()
        self.skipped = 0
        self.histogram: np.ndarray | None = None
        self._last_ok: rec.RecordMeta | None = None  # the last meta object that matched (identity fast path)

    def describe_entry(self, index: int) -> str:
        """Name entry ``index`` of this stage in messages."""
        return f'"{self.items[index]}" (stage "{self.stage}")'

    def run(self, pool) -> dict:
        """Encode every entry with ``pool`` and write the records; return the stage's ``dataset.json`` info."""
        t0 = time.perf_counter()
        writer = StageWriter(self.folder)
        try:
            self.progress.update(self.stage, 0, 0, force=True)
            held: list = []  # results waiting for the layout vote
            for item in pool.imap(self.plan, self.mean_every, self.describe_entry):
                held.append(item)
                if self.layout.layout is None and sum(_entries(r) for _, r in held) < AGREEMENT_SAMPLE:
                    continue
                self._take_all(held, writer, pool)
                held = []
            self._take_all(held, writer, pool)
            count = writer.count
        finally:
            writer.close()
        return {
            "count": count,
            "entries": len(self.items),
            "skipped": self.skipped,
            "encodings": dict(self.encodings),
            "label_histogram": None if self.histogram is None else self.histogram.tolist(),
            "lmdb": self.folder.name,
            "map_grows": writer.map_grows,
            "encode_s": round(time.perf_counter() - t0, 3),
        }

    # -- one chunk's result ------------------------------------------------------

    def _take_all(self, held: list, writer: StageWriter, pool) -> None:
        """Decide the layout (unless decided) by a vote of the ``held`` results, then take them in order."""
        if self.layout.layout is None:
            self._vote(held)
        for start, result in held:
            self._take(start, result, writer)
            pool.release(result)

    def _vote(self, held: list) -> None:
        metas = []
        for _, result in held:
            if isinstance(result.outcomes, UniformChunk):
                metas.extend([result.outcomes.meta] * len(result.outcomes.records))
            else:
                metas.extend(meta for o in result.outcomes if o.error is None for meta in o.metas)
        self.layout.decide(metas)

    def _take(self, start: int, result: ChunkResult, writer: StageWriter) -> None:
        outcomes = result.outcomes
        if isinstance(outcomes, UniformChunk):
            self.layout.decide([outcomes.meta])
            if outcomes.meta.layout == self.layout.layout:
                self._add_histogram(outcomes.histogram)
                self.encodings[rec.ENCODINGS[outcomes.meta.encoding]] += len(outcomes.records)
                self._finish(outcomes.records, len(outcomes.per_entry), 0, result.mean_sums, writer)
                return
            outcomes = outcomes.expand()  # every entry of the chunk has another layout
        self.layout.decide(meta for o in outcomes if o.error is None for meta in o.metas)
        good: list[bytes] = []
        errors = 0
        class_ids: list[int] = []
        for offset, outcome in enumerate(outcomes):
            error = outcome.error if outcome.error is not None else self._layout_error(outcome)
            if error is not None:
                errors += 1
                self.report.record(self.stage, self.items[start + offset], error)
                continue
            good.extend(outcome.records)
            if isinstance(outcome.histogram, list):
                class_ids.extend(outcome.histogram)
            else:
                self._add_histogram(outcome.histogram)
            for meta in outcome.metas:
                self.encodings[rec.ENCODINGS[meta.encoding]] += 1
        if class_ids:
            ids = np.asarray(class_ids, dtype=np.int64)
            if ids.max() < rec.MAX_HISTOGRAM_CLASSES:
                self._add_histogram(np.bincount(ids))
        self._finish(good, len(outcomes), errors, result.mean_sums, writer)

    def _layout_error(self, outcome: Outcome) -> str | None:
        expected = self.layout.layout
        for meta in outcome.metas:
            if meta is self._last_ok:
                continue
            if meta.layout != expected:
                return layout_mismatch(meta.layout, expected)
            self._last_ok = meta
        return None

    def _add_histogram(self, hist) -> None:
        self.histogram = rec.add_histograms(self.histogram, hist)

    def _finish(self, good: list, entries: int, errors: int, sums: dict, writer: StageWriter) -> None:
        """Account for a chunk's good records and skipped entries, then write and report."""
        for layout, (total, count) in sums.items():
            slot = self.mean_sums.get(layout)
            if slot is None:
                self.mean_sums[layout] = [total, count]
            else:
                slot[0] += total
                slot[1] += count
        writer.append(good)  # one transaction per chunk: shared-memory records must be copied before release
        self.plan.observe(entries, sum(map(len, good)))
        self.skipped += errors
        self.progress.update(self.stage, entries, errors)
        self.report.check_budget()
