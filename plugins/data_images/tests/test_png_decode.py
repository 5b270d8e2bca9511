"""The plain-PNG fast path decodes exactly what Pillow decodes, and leaves every other file to Pillow."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from digits_data_images.encoding import encode_image_file
from digits_data_images.png_decode import decode_plain_png


def _png(image: Image.Image, **options) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG", **options)
    return out.getvalue()


def _pillow(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as image:
        arr = np.asarray(image)
    return arr if arr.ndim == 3 else arr[:, :, None]


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


@pytest.mark.parametrize("mode, shape", [("L", (28, 28)), ("L", (7, 33)), ("RGB", (31, 5, 3)), ("RGB", (64, 48, 3))])
@pytest.mark.parametrize("level", [0, 1, 6, 9])
def test_plain_pngs_decode_as_pillow_decodes_them(mode, shape, level):
    rng = np.random.default_rng(level + shape[0])
    arr = rng.integers(0, 256, shape, dtype=np.uint8)
    arr[: shape[0] // 2] //= 3  # rows that compress: Pillow picks other filters for them
    data = _png(Image.fromarray(arr, mode), compress_level=level)
    got = decode_plain_png(data, 1 if mode == "L" else 3)
    assert got is not None and got.dtype == np.uint8
    np.testing.assert_array_equal(got, _pillow(data))


def test_image_data_split_over_several_idat_chunks_and_ancillary_chunks():
    arr = np.arange(40 * 30, dtype=np.uint32).reshape(40, 30).astype(np.uint8)
    data = _png(Image.fromarray(arr, "L"))
    (length,) = struct.unpack(">I", data[33:37])
    assert data[37:41] == b"IDAT"
    idat = data[41 : 41 + length]
    rebuilt = (
        data[:33]
        + _chunk(b"tEXt", b"Comment\x00hello")
        + _chunk(b"IDAT", idat[:10])
        + _chunk(b"IDAT", idat[10:])
        + _chunk(b"IEND", b"")
    )
    np.testing.assert_array_equal(decode_plain_png(rebuilt, 1), _pillow(rebuilt))


@pytest.mark.parametrize(
    "make, channels",
    [
        (lambda: _png(Image.new("P", (8, 8))), 1),  # palette
        (lambda: _png(Image.new("RGBA", (8, 8))), 3),  # alpha
        (lambda: _png(Image.new("LA", (8, 8))), 1),
        (lambda: _png(Image.fromarray(np.zeros((8, 8), np.uint16))), 1),  # 16-bit
        (lambda: _png(Image.new("1", (8, 8))), 1),  # 1-bit
        (lambda: _png(Image.new("L", (8, 8))), 3),  # needs a conversion
        (lambda: _png(Image.new("RGB", (8, 8))), 1),
        (
            lambda: _png(Image.new("RGB", (8, 8)), save_all=True, append_images=[Image.new("RGB", (8, 8), "red")]),
            3,
        ),  # animated (APNG)
        (lambda: b"\xff\xd8\xff\xe0 a JPEG", 3),
    ],
)
def test_other_files_are_left_to_pillow(make, channels):
    assert decode_plain_png(make(), channels) is None


def test_an_interlaced_png_is_left_to_pillow():
    data = bytearray(_png(Image.new("L", (8, 8), 7)))
    data[28] = 1  # interlace method in IHDR (then the CRC no longer matches either)
    assert decode_plain_png(bytes(data), 1) is None


def test_a_damaged_header_chunk_or_a_cut_file_is_left_to_pillow():
    data = _png(Image.fromarray(np.full((16, 16), 9, np.uint8)))
    damaged = bytearray(data)
    damaged[20] ^= 1  # IHDR height, CRC unchanged
    assert decode_plain_png(bytes(damaged), 1) is None
    assert decode_plain_png(data[: len(data) // 2], 1) is None


def test_image_data_as_pillow_judges_it_short_stream_kept_garbage_an_error_naming_the_file(tmp_path):
    header = _chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 4, 8, 0, 0, 0, 0))  # 8×4 gray
    short = b"\x89PNG\r\n\x1a\n" + header + _chunk(b"IDAT", zlib.compress(b"\x00" + b"\x05" * 8)) + _chunk(b"IEND", b"")
    np.testing.assert_array_equal(decode_plain_png(short, 1), _pillow(short))  # Pillow, too, fills the rest with 0
    garbage = b"\x89PNG\r\n\x1a\n" + header + _chunk(b"IDAT", b"not a zlib stream") + _chunk(b"IEND", b"")
    with pytest.raises(OSError):
        _pillow(garbage)
    path = tmp_path / "garbage.png"
    path.write_bytes(garbage)
    with pytest.raises(ValueError, match=f"{path}: cannot decode image"):
        encode_image_file(str(path), channels=1, width=8, height=4, encoding="none")


@pytest.mark.parametrize("encoding", ["none", "png"])
def test_the_plugin_stores_the_same_pixels_through_the_fast_path(tmp_path, encoding, monkeypatch):
    import digits_data_images.encoding as encoding_module

    arr = np.random.default_rng(3).integers(0, 256, (20, 30, 3), dtype=np.uint8)
    path = tmp_path / "a.png"
    Image.fromarray(arr).save(path)
    options = {"channels": 3, "width": 15, "height": 10, "encoding": encoding, "resize_mode": "squash"}
    fast = encode_image_file(str(path), **options)
    monkeypatch.setattr(encoding_module, "decode_plain_png", lambda data, channels: None)
    slow = encode_image_file(str(path), **options)
    if encoding == "none":
        np.testing.assert_array_equal(fast, slow)
    else:
        assert fast.data == slow.data and fast.shape == slow.shape == (10, 15, 3)


@pytest.mark.parametrize("size", [0, 1, 65535, 65536, 65537, 3 << 20])
def test_read_file_reads_files_of_any_size(tmp_path, size):
    from digits_data_images.encoding import read_file

    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    (tmp_path / "f").write_bytes(data)
    assert read_file(str(tmp_path / "f")) == data


def test_read_file_names_what_it_cannot_read(tmp_path):
    from digits_data_images.encoding import read_file

    with pytest.raises(ValueError, match=f"{tmp_path}: cannot read file \\(Is a directory\\)"):
        read_file(str(tmp_path))
    with pytest.raises(ValueError, match="missing.png: cannot read file \\(No such file or directory\\)"):
        read_file(str(tmp_path / "missing.png"))
