"""The worker side of a dataset job: encode a chunk of entries into packed records.

:func:`encode_chunk` runs in a worker process (or in the job's own process
with one worker). It calls the plugin's ``encode_entry`` on each entry,
checks and packs every ``(feature, label)`` pair (:func:`records.pack_record`)
and sums the decoded pixels for the mean image. A bad entry becomes an error
message; it never stops the chunk.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

import numpy as np

from ..interfaces import records as rec
from .arena import SlotSink

#: At most this many record layouts get a running mean sum per chunk (more means a broken plugin).
MAX_MEAN_LAYOUTS = 4


class Outcome(NamedTuple):
    """What one entry became: its records and their metas, or an error message."""

    records: list | None
    metas: list | None
    error: str | None
    #: Class ids (a list, counted by the parent) or a mask histogram (array), or None.
    histogram: Any


class UniformChunk(NamedTuple):
    """A chunk whose entries all encoded, to records sharing one meta (the usual case, sent compactly)."""

    meta: rec.RecordMeta
    records: list
    per_entry: list  # records per entry (usually all 1)
    histogram: Any  # class or mask histogram of the chunk, or None

    def expand(self) -> list[Outcome]:
        """Return the per-entry outcomes this chunk stands for."""
        outcomes, i = [], 0
        for n in self.per_entry:
            outcomes.append(Outcome(self.records[i : i + n], [self.meta] * n, None, None))
            i += n
        return outcomes


class ChunkResult(NamedTuple):
    """A worker's answer for one chunk."""

    outcomes: list[Outcome] | UniformChunk
    #: Record layout -> ``(float64 sum of pixels, image count)`` for the mean image.
    mean_sums: dict
    #: The shared-memory slot holding the records given as spans (see :mod:`.arena`), or None.
    slot: int | None = None

    def map_records(self, func) -> ChunkResult:
        """Return this result with every entry's record list replaced by ``func(records)``."""
        outcomes = self.outcomes
        if isinstance(outcomes, UniformChunk):
            outcomes = outcomes._replace(records=func(outcomes.records))
        else:
            outcomes = [o if o.records is None else o._replace(records=func(o.records)) for o in outcomes]
        return self._replace(outcomes=outcomes)


def describe_exception(exc: BaseException) -> str:
    """``"Type: message"`` (or just the type when the message is empty)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class MeanSum:
    """A running sum of images of one shape for the mean image, exact for integer pixels.

    uint8 images are summed in integers: small ones (at most
    :attr:`BATCH_PIXELS` values) are kept (references, no copy) and summed
    :attr:`BATCH` at a time in one ``uint32`` reduction (one numpy call per
    batch instead of one per image); larger ones are added into a ``uint16``
    buffer (exact for 257 images, several times faster than float64
    arithmetic). Both are folded into the float64 total before they could
    overflow; other dtypes go straight into the float64 total.
    """

    #: Small uint8 images summed at once (their pixels stay referenced until then).
    BATCH = 64
    #: Images with at most this many values are batched (above it the per-call cost no longer dominates).
    BATCH_PIXELS = 4096
    #: uint8 images a uint16 buffer holds without overflow (257 * 255 <= 65535).
    SMALL_LIMIT = 257

    def __init__(self, shape: tuple):
        self.total = np.zeros(shape, np.float64)
        self.count = 0
        self._batch: list[np.ndarray] = []
        self._small: np.ndarray | None = None
        self._small_count = 0

    def add(self, pixels: np.ndarray) -> None:
        """Add one image."""
        if pixels.dtype != np.uint8:
            np.add(self.total, pixels, out=self.total)
            self.count += 1
        elif pixels.size <= self.BATCH_PIXELS:
            self._batch.append(pixels)
            if len(self._batch) == self.BATCH:
                self._fold()
        else:
            if self._small is None:
                self._small = np.zeros(self.total.shape, np.uint16)
            np.add(self._small, pixels, out=self._small)
            self._small_count += 1
            if self._small_count == self.SMALL_LIMIT:
                self._fold()

    def _fold(self) -> None:
        if self._batch:
            self.total += np.stack(self._batch).sum(axis=0, dtype=np.uint32)
            self.count += len(self._batch)
            self._batch = []
        if self._small_count:
            self.total += self._small
            self.count += self._small_count
            self._small[...] = 0
            self._small_count = 0

    def result(self) -> tuple[np.ndarray, int]:
        """Return ``(float64 sum, count)`` of everything added."""
        self._fold()
        return self.total, self.count


class _Worker:
    """The state a worker process keeps between chunks (set by the pool's initializer)."""

    plugin: Any = None
    #: Optional shared int64 array: ``[2*slot]`` = pid, ``[2*slot+1]`` = index of the entry being encoded.
    tracker: Any = None
    slot: int = -1
    #: ``(shared region, slot size)`` records are written into (see :mod:`.arena`), or None.
    arena: Any = None


_CLASS_LABEL = struct.Struct("<q")
_PAYLOAD_LENGTH = struct.Struct("<I")
#: Raw feature dtypes whose array bytes are the record's bytes as they are (little-endian or single bytes).
_AS_IS_DTYPES = frozenset({"|u1", "<u2", "<i2", "<f4"})


class RepeatedLayout:
    """Prepares records that repeat the previous record's layout without checking the contract again.

    A plugin returns the same kind of pair for entry after entry: an array of
    one shape and dtype, or an :class:`~.records.EncodedImage` of one format,
    shape and dtype, with an int class label. Once such a pair has passed
    :func:`~.records.prepare_record`, a later pair of the same kind with a
    non-negative int label has the same meta and header but for the payload
    length (encoded images); only the payload and the 8 label bytes differ.
    Anything else goes through :func:`~.records.prepare_record`.
    """

    def __init__(self):
        self._raw: rec.PreparedRecord | None = None  # template for arrays
        self._raw_key: tuple | None = None  # (shape, dtype)
        self._encoded: rec.PreparedRecord | None = None  # template for encoded images
        self._encoded_key: tuple | None = None  # (format, shape, dtype)

    def prepare(self, feature, label, kind: str | None = None) -> rec.PreparedRecord:
        """Return the checked record of ``(feature, label)``, the label of the declared ``kind``.

        Raises:
            RecordError: The pair breaks the data contract.
        """
        if type(label) is int and 0 <= label < 1 << 63 and kind in (None, "class"):
            feature_type = type(feature)
            if feature_type is np.ndarray and self._raw is not None:
                if (feature.shape, feature.dtype) == self._raw_key and feature.flags.c_contiguous:
                    return self._raw._replace(payload=feature, label=_CLASS_LABEL.pack(label), pixels=feature)
            elif feature_type is rec.EncodedImage and self._encoded is not None:
                data = feature.data
                if type(data) is bytes and data and (feature.format, feature.shape, feature.dtype) == self._encoded_key:
                    header = self._encoded.header
                    # bytes 20-23 of the header: the feature payload's length (docs/formats.md)
                    header = header[:20] + _PAYLOAD_LENGTH.pack(len(data)) + header[24:]
                    return self._encoded._replace(
                        header=header, payload=data, label=_CLASS_LABEL.pack(label), pixels=feature.array
                    )
        prepared = rec.prepare_record(feature, label, kind)
        self._learn(feature, label, prepared)
        return prepared

    def _learn(self, feature, label, prepared: rec.PreparedRecord) -> None:
        if type(label) is not int or prepared.meta.label_kind != rec.CLASS:
            return
        if (
            type(feature) is np.ndarray
            and prepared.meta.encoding == rec.RAW
            and feature.dtype.str in _AS_IS_DTYPES
            and feature.flags.c_contiguous
        ):
            self._raw, self._raw_key = prepared, (feature.shape, feature.dtype)
        elif type(feature) is rec.EncodedImage and type(feature.data) is bytes and type(feature.shape) is tuple:
            self._encoded, self._encoded_key = prepared, (feature.format, feature.shape, feature.dtype)


def set_worker_plugin(plugin, tracker=None, slot: int = -1, arena: tuple | None = None) -> None:
    """Make ``plugin`` the one :func:`encode_chunk` uses in this process (``None`` forgets it)."""
    _Worker.plugin, _Worker.tracker, _Worker.slot, _Worker.arena = plugin, tracker, slot, arena


def _track(index: int) -> None:
    tracker = _Worker.tracker
    if tracker is not None:
        tracker[2 * _Worker.slot + 1] = index


def encode_chunk(start: int, entries: list, mean_every: int, slot: int | None = None) -> ChunkResult:
    """Encode ``entries`` (stage indexes from ``start``) with this process's plugin.

    Args:
        start: Index of the first entry in its stage.
        entries: The entries, as ``itemize_entries`` listed them.
        mean_every: Sum every image with decoded pixels, and decode every
            ``mean_every``-th encoded one, for the mean image; 0 for none.
        slot: The shared-memory slot to write the records into, if any.

    Returns:
        A :class:`ChunkResult`: a :class:`UniformChunk` when every entry
        encoded to records of one meta, else one :class:`Outcome` per entry.
    """
    plugin = _Worker.plugin
    outcomes: list[Outcome] = []
    state = _ChunkState()
    sink = SlotSink(*(_Worker.arena or (None, 0)), slot)
    for offset, entry in enumerate(entries):
        _track(start + offset)
        try:
            outcomes.append(_encode_entry(plugin, entry, start + offset, mean_every, state, sink))
        except Exception as exc:  # noqa: BLE001 - a bad entry is skipped and reported
            outcomes.append(Outcome(None, None, describe_exception(exc), None))
    _track(-1)
    mean_sums = {layout: acc.result() for layout, acc in state.sums.items()}
    if len(state.interned) == 1 and all(o.error is None for o in outcomes):
        return ChunkResult(_uniform(next(iter(state.interned)), outcomes), mean_sums, slot)
    return ChunkResult(outcomes, mean_sums, slot)


class _ChunkState:
    """What encoding one chunk keeps: interned metas, mean sums per layout, the repeated-layout shortcut.

    Consecutive records usually share one meta object; the last lookups are
    remembered by identity, so such a record costs no hashing.
    """

    def __init__(self):
        self.layout = RepeatedLayout()
        self.interned: dict = {}  # equal metas become one object: pickled once per chunk
        self.sums: dict[tuple, MeanSum] = {}
        self._meta_seen: Any = None
        self._meta_kept: Any = None
        self._mean_meta: Any = None
        self._mean_acc: MeanSum | None = None

    def intern(self, meta: rec.RecordMeta) -> rec.RecordMeta:
        """The chunk's one object equal to ``meta``."""
        if meta is not self._meta_seen:
            self._meta_seen, self._meta_kept = meta, self.interned.setdefault(meta, meta)
        return self._meta_kept

    def add_to_mean(self, meta: rec.RecordMeta, feature, pixels) -> None:
        """Add a record's pixels (decoded from ``feature`` when ``pixels`` is None) to its layout's mean sum."""
        if pixels is None:
            pixels = rec.decode_image_bytes(feature.data, meta.feature_shape, meta.feature_dtype)
        if meta is not self._mean_meta:
            acc = self.sums.get(meta.layout)
            if acc is None:
                if len(self.sums) >= MAX_MEAN_LAYOUTS:
                    return
                acc = self.sums[meta.layout] = MeanSum(meta.feature_shape)
            self._mean_meta, self._mean_acc = meta, acc
        self._mean_acc.add(pixels if pixels.shape == meta.feature_shape else pixels.reshape(meta.feature_shape))


def _encode_entry(plugin, entry, index: int, mean_every: int, state: _ChunkState, sink: SlotSink) -> Outcome:
    result = plugin.encode_entry(entry)
    pairs = result if isinstance(result, list) else (result,)
    if not pairs:
        raise rec.RecordError("encode_entry returned an empty list")
    packed, metas, hist = [], [], None
    for pair in pairs:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise rec.RecordError(
                f"encode_entry must return (feature, label) or a list of them, got {type(pair).__name__}"
            )
        label, kind = rec.declared(pair[1], getattr(plugin, "label_kind", None))
        pair = (pair[0], label)
        prepared = state.layout.prepare(pair[0], label, kind)
        pixels = prepared.pixels
        meta = state.intern(prepared.meta)
        if mean_every and (pixels is not None or index % mean_every == 0):
            state.add_to_mean(meta, pair[0], pixels)
        packed.append(sink.put(prepared))
        metas.append(meta)
        if meta.label_kind == rec.CLASS:  # class ids are counted in the parent, per chunk
            hist = [int(pair[1])] if hist is None else hist + [int(pair[1])]
        else:
            hist = rec.add_histograms(hist, rec.label_histogram(pair[1], meta.label_kind))
    return Outcome(packed, metas, None, hist)


def _uniform(meta: rec.RecordMeta, outcomes: list[Outcome]) -> UniformChunk:
    """Pack a chunk of good entries sharing ``meta`` so the parent does no per-record Python work."""
    records = [r for o in outcomes for r in o.records]
    per_entry = [len(o.records) for o in outcomes]
    if meta.label_kind == rec.CLASS:
        labels = np.fromiter((c for o in outcomes for c in o.histogram), dtype=np.int64, count=len(records))
        hist = np.bincount(labels) if len(labels) and labels.max() < rec.MAX_HISTOGRAM_CLASSES else None
    else:
        hist = None
        for o in outcomes:
            hist = rec.add_histograms(hist, o.histogram)
    return UniformChunk(meta, records, per_entry, hist)
