"""Shared memory between the job process and its encoder workers: records cross without pickling.

The job process maps one anonymous shared region (``mmap(-1, ...)``) before
it forks its workers, cut into slots of :data:`SLOT_BYTES`. Each chunk sent
to a worker gets a free slot; the worker writes the chunk's packed records
straight into it (one copy of the decoded pixels) and answers with their
``(offset, length)`` spans only; the job process hands memoryviews of those
spans to LMDB (the one copy into the database) and frees the slot.

A record that does not fit in the rest of its slot travels as bytes, as
does everything when no slot is free or the workers are not forked (a
``forkserver`` cannot inherit an anonymous mapping). The mapping needs no
clean-up: the kernel frees it when the last process using it is gone, even
after ``kill -9``.
"""

from __future__ import annotations

import mmap

from ..interfaces import records as rec

#: Bytes per slot: twice the byte size chunks aim for (see ``stage.CHUNK_BYTES``).
SLOT_BYTES = 16 << 20


class Arena:
    """The job process's side: the shared region and its free slots.

    Args:
        slots: Number of slots (chunks that can be in flight or waiting to be written).
        slot_bytes: Size of one slot.
    """

    def __init__(self, slots: int, slot_bytes: int = SLOT_BYTES):
        self.slot_bytes = slot_bytes
        self.region = mmap.mmap(-1, slots * slot_bytes)
        self.view = memoryview(self.region)
        self._free = list(range(slots - 1, -1, -1))

    def take(self) -> int | None:
        """Return a free slot, or ``None`` when all are in use."""
        return self._free.pop() if self._free else None

    def release(self, slot: int | None) -> None:
        """Give ``slot`` back (its records must already be in LMDB)."""
        if slot is not None:
            self._free.append(slot)

    def resolve(self, records: list) -> list:
        """Turn the spans in ``records`` into memoryviews of the region (bytes stay bytes)."""
        view = self.view
        return [view[r[0] : r[0] + r[1]] if type(r) is tuple else r for r in records]


class SlotSink:
    """A worker's side: packs the records of one chunk into its slot, or into bytes when they do not fit.

    Args:
        region: The shared region (inherited through fork), or ``None`` for no sharing.
        slot_bytes: Size of one slot.
        slot: The chunk's slot, or ``None``.
    """

    def __init__(self, region, slot_bytes: int, slot: int | None):
        self.view = memoryview(region) if region is not None and slot is not None else None
        self.offset = (slot or 0) * slot_bytes
        self.end = self.offset + slot_bytes

    def put(self, prepared: rec.PreparedRecord):
        """Store one record; return its ``(offset, length)`` span in the region, or its bytes."""
        if self.view is not None:
            size = prepared.size
            if self.offset + size <= self.end:
                prepared.write_into(self.view, self.offset)
                span = (self.offset, size)
                self.offset += size
                return span
        return b"".join((prepared.header, memoryview(prepared.payload).cast("B"), prepared.label))
