"""Compressed DICOM decodes through the reader bit-exactly, with the ``codecs`` extra installed.

The files are written here with pydicom's own encoders (``Dataset.compress``:
pyjpegls for JPEG-LS, pylibjpeg-openjpeg for JPEG 2000, pydicom's RLE
encoder), then read with :func:`read_dicom_image` and compared with pydicom's
own decode and, for the lossless syntaxes, with the original pixels.
The test environment installs ``digits-data-sunnybrook[codecs]`` (see the
Makefile); a missing codec fails here rather than skipping.
"""

from __future__ import annotations

import numpy as np
import pytest

from digits_data_sunnybrook.dicom import check_decoders, read_dicom_image

CASES = {
    # name: (transfer syntax name, encoding plugin, bits stored, signed, extra compress kwargs)
    "jpeg-ls-lossless-12bit": ("JPEGLSLossless", "pyjpegls", 12, False, {}),
    "jpeg-ls-near-lossless": ("JPEGLSNearLossless", "pyjpegls", 12, False, {"jls_error": 3}),
    "jpeg-2000-lossless-16bit-signed": ("JPEG2000Lossless", "pylibjpeg", 16, True, {}),
    "jpeg-2000-lossless-12bit": ("JPEG2000Lossless", "pylibjpeg", 12, False, {}),
    "rle-lossless": ("RLELossless", "", 16, False, {}),
}


def mr_slice(bits: int, signed: bool, rows: int = 40, cols: int = 56, seed: int = 0) -> tuple:
    """A small MR-like slice (smooth anatomy plus noise, full stored range used) as an uncompressed dataset."""
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, MRImageStorage, generate_uid

    rng = np.random.default_rng(seed)
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    yy, xx = np.mgrid[0:rows, 0:cols]
    blob = np.exp(-(((yy - rows / 2) / (rows / 4)) ** 2 + ((xx - cols / 2) / (cols / 4)) ** 2))
    values = lo + (hi - lo) * (0.1 + 0.8 * blob) + rng.normal(0, (hi - lo) * 0.02, (rows, cols))
    arr = np.clip(np.rint(values), lo, hi).astype(np.int16 if signed else np.uint16)
    arr[0, 0], arr[0, 1] = lo, hi  # the extremes of the stored range survive coding
    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.file_meta.MediaStorageSOPClassUID = MRImageStorage
    ds.SOPClassUID = MRImageStorage
    ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID = generate_uid()
    ds.Modality = "MR"
    ds.Rows, ds.Columns = rows, cols
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit = 16, bits, bits - 1
    ds.PixelRepresentation = 1 if signed else 0
    ds.PixelData = arr.tobytes()
    return ds, arr


@pytest.mark.parametrize("case", list(CASES))
def test_compressed_file_decodes_like_pydicom(case, tmp_path):
    import pydicom
    import pydicom.uid

    syntax_name, plugin, bits, signed, kwargs = CASES[case]
    syntax = getattr(pydicom.uid, syntax_name)
    ds, original = mr_slice(bits, signed)
    ds.compress(syntax, original, encoding_plugin=plugin, **kwargs)
    path = tmp_path / f"{case}.dcm"
    ds.save_as(path, enforce_file_format=True)

    assert check_decoders([path]) == {str(syntax): 1}  # the codecs extra provides a decoder
    reread = pydicom.dcmread(path)
    assert reread.file_meta.TransferSyntaxUID == syntax and syntax.is_encapsulated
    if syntax_name.startswith("JPEG"):
        assert len(reread.PixelData) < original.nbytes  # really compressed
    theirs = reread.pixel_array
    ours = read_dicom_image(path)
    assert ours.shape == (*original.shape, 1) and ours.dtype == original.dtype
    np.testing.assert_array_equal(ours[..., 0], theirs)  # bit-exact with pydicom's own decode
    if "jls_error" in kwargs:  # near-lossless JPEG-LS
        error = np.abs(ours[..., 0].astype(np.int32) - original.astype(np.int32))
        assert 0 < error.max() <= kwargs["jls_error"]  # really lossy, within the requested bound
    else:
        np.testing.assert_array_equal(ours[..., 0], original)


#: Run first in a fresh interpreter: makes the codec packages unimportable, as on a machine without the extra.
HIDE_CODECS = """
import importlib.abc, sys
class _HideCodecs(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("pylibjpeg", "libjpeg", "openjpeg", "jpeg_ls", "rle", "gdcm"):
            raise ImportError("hidden by the test")
sys.meta_path.insert(0, _HideCodecs())
"""


def test_without_the_codecs_the_same_file_names_the_extra(tmp_path):
    """The "decoder missing" path, tested here too although this environment has the decoders."""
    import subprocess
    import sys

    import pydicom.uid

    ds, original = mr_slice(12, False)
    ds.compress(pydicom.uid.JPEGLSLossless, original, encoding_plugin="pyjpegls")
    path = tmp_path / "jpeg-ls.dcm"
    ds.save_as(path, enforce_file_format=True)
    code = HIDE_CODECS + (
        "from digits_data_sunnybrook.dicom import MissingDecoderError, check_decoders, read_dicom_image\n"
        f"path = {str(path)!r}\n"
        "for call in (lambda: check_decoders([path, path]), lambda: read_dicom_image(path)):\n"
        "    try:\n"
        "        call()\n"
        "        print('NO ERROR')\n"
        "    except MissingDecoderError as exc:\n"
        "        print('ERROR', exc.count, str(exc).replace(chr(10), ' '))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("ERROR ") for line in lines), result.stdout
    assert lines[0].startswith("ERROR 2 ")
    for line in lines:
        assert str(path) in line and "JPEG-LS" in line and "digits-data-sunnybrook[codecs]" in line
