"""The ingest fast path: records through shared memory, the mean image's integer sums."""

from __future__ import annotations

import numpy as np
import pytest

from digits_core.datasets import arena as arena_module
from digits_core.datasets.arena import Arena, SlotSink
from digits_core.datasets.encoder import MeanSum
from digits_core.interfaces.records import pack_record, prepare_record


def test_records_fit_in_their_slot_as_spans_and_the_rest_travel_as_bytes():
    arena = Arena(2, slot_bytes=200)
    slot = arena.take()
    sink = SlotSink(arena.region, arena.slot_bytes, slot)
    pairs = [(np.full((4, 5, 2), i, np.uint8), i) for i in range(4)]  # 32 + 40 + 8 = 80 bytes each
    out = [sink.put(prepare_record(*pair)) for pair in pairs]
    assert [type(o) for o in out] == [tuple, tuple, bytes, bytes]  # 2 × 80 fit in 200 bytes
    assert all(slot * 200 <= o[0] < (slot + 1) * 200 for o in out[:2])
    resolved = arena.resolve(out)
    assert [bytes(r) for r in resolved] == [pack_record(*pair)[0] for pair in pairs]
    arena.release(slot)
    assert sorted([arena.take(), arena.take()]) == [0, 1] and arena.take() is None
    assert type(SlotSink(None, 0, None).put(prepare_record(*pairs[0]))) is bytes


def test_a_job_whose_records_overflow_their_slots_is_still_bit_exact(monkeypatch, tmp_path):
    from test_datasets_create import SynthIngestion, synth_feature  # the synthetic plugin of the job tests

    from digits_core import registry
    from digits_core.datasets import create_dataset, open_dataset

    monkeypatch.setattr(arena_module, "SLOT_BYTES", 1000)  # a few 6×5×2 float32 records per slot
    registry.register(SynthIngestion)
    try:
        job = create_dataset("test-synth", {"n": 150, "dtype": "float32"}, workers=2, jobs_dir=tmp_path)
    finally:
        registry.unregister(SynthIngestion)
    features, labels = open_dataset(job.path).read_all("train")
    assert features.tobytes() == np.stack([synth_feature("float32", i) for i in range(150)]).tobytes()
    assert labels.tolist() == [i % 4 for i in range(150)]


@pytest.mark.parametrize("shape", [(3, 4, 1), (70, 60, 1)])  # batched / uint16 buffer (over BATCH_PIXELS)
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "float32"])
def test_mean_sums_are_exact_past_the_uint16_buffer(dtype, shape):
    rng = np.random.default_rng(0)
    high = 255 if dtype != "uint16" else 65535
    images = [rng.integers(0, high, shape, endpoint=True).astype(dtype) for _ in range(700)]
    acc = MeanSum(shape)
    for image in images:
        acc.add(image)
    total, count = acc.result()
    assert count == 700 and total.dtype == np.float64
    np.testing.assert_allclose(total, np.sum(np.stack(images).astype(np.float64), axis=0), rtol=1e-12)


def test_repeated_layouts_give_the_records_the_full_check_gives():
    from digits_core.datasets.encoder import RepeatedLayout
    from digits_core.interfaces.records import EncodedImage, RecordError

    rng = np.random.default_rng(1)
    big_endian = rng.integers(0, 999, (3, 4, 1)).astype(">u2")
    pairs = [(rng.integers(0, 256, (3, 4, 1), dtype=np.uint8), i) for i in range(3)]
    pairs += [
        (rng.integers(0, 256, (3, 4), dtype=np.uint8), 7),  # 2-D: another shape
        (rng.integers(0, 256, (3, 4), dtype=np.uint8), 2**40),
        (rng.random((3, 4, 1)).astype(np.float32), 1),  # another dtype
        (rng.random((3, 4, 1)).astype(np.float32), np.int64(3)),  # a numpy label
        (big_endian, 2),
        (big_endian.astype("<u2"), 2),  # byte order
        (np.asfortranarray(rng.integers(0, 9, (3, 4, 2), dtype=np.uint8)), 0),
        (rng.integers(0, 9, (3, 4, 2), dtype=np.uint8)[:, ::-1], 1),  # not contiguous
        (rng.integers(0, 256, (3, 4, 1), dtype=np.uint8), 0.5),  # a regression target
        (EncodedImage(b"\x89PNG one", "png", (3, 4, 1)), 4),
        (EncodedImage(b"\x89PNG longer payload", "png", (3, 4, 1), array=np.zeros((3, 4, 1), np.uint8)), 5),
        (EncodedImage(b"\xff\xd8 a jpeg", "jpg", (3, 4, 1)), 6),  # another format
        (EncodedImage(b"\xff\xd8 another", "jpg", (3, 4, 3)), 6),  # another shape
        (EncodedImage(b"\xff\xd8 list shape", "jpg", [3, 4, 3]), 1),
        (EncodedImage(b"\x89PNG 16 bit", "png", (3, 4, 3), "uint16"), 2),
        (EncodedImage(bytearray(b"\x89PNG bytearray"), "png", (3, 4, 3), "uint16"), 3),
    ]
    layout = RepeatedLayout()
    for feature, label in pairs:
        expected = pack_record(feature, label)[0]
        prepared = layout.prepare(feature, label)
        got = b"".join((prepared.header, memoryview(prepared.payload).cast("B"), prepared.label))
        assert got == expected, (feature, label)
        assert prepared.meta == prepare_record(feature, label).meta
        assert prepared.pixels is (feature.array if isinstance(feature, EncodedImage) else prepared.pixels)
    for feature in (np.zeros((3, 4, 1), np.uint8), EncodedImage(b"\x89PNG", "png", (3, 4, 1))):
        layout.prepare(feature, 1)
        for label, message in ((-1, "negative"), (True, "bool"), (2**63, "int64"), (None, "label is None")):
            with pytest.raises(RecordError, match=message):
                layout.prepare(feature, label)
    with pytest.raises(RecordError, match="non-empty bytes"):
        layout.prepare(EncodedImage(b"", "png", (3, 4, 1)), 1)
