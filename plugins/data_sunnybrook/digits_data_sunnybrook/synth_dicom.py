"""DICOM encoding of the synthetic Sunnybrook series (:mod:`digits_data_sunnybrook.synth`).

The base data set of a case's images (MR Image Storage, explicit VR little endian, 12 bits stored) and a
fast writer of the files of one series, byte for byte what ``pydicom.dcmwrite`` writes.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import numpy as np

from .layout import PHASES_PER_SLICE, image_filename

_UID_ROOT = "1.2.826.0.1.3680043.8.498."  # pydicom's UID root


def uid(*parts) -> str:
    """A deterministic UID (46 characters, so ``.<image number>`` can be appended)."""
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()
    return _UID_ROOT + str(int(digest[:18], 16) % 10**19 + 10**19)


def base_dataset(case: str, study_uid: str, size: int, seed: int):
    """The elements every image of one case shares (a ``pydicom`` data set with its file meta)."""
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import PYDICOM_IMPLEMENTATION_UID, ExplicitVRLittleEndian, MRImageStorage

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = MRImageStorage
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    meta.FileMetaInformationVersion = b"\x00\x01"
    meta.ImplementationClassUID = PYDICOM_IMPLEMENTATION_UID
    meta.ImplementationVersionName = "DIGITS_SYNTH_1"
    ds = Dataset()
    ds.file_meta = meta
    ds.SpecificCharacterSet = "ISO_IR 100"
    ds.ImageType = ["ORIGINAL", "PRIMARY", "OTHER"]
    ds.SOPClassUID = MRImageStorage
    ds.StudyDate = "20090101"
    ds.StudyTime = "120000"
    ds.Modality = "MR"
    ds.Manufacturer = "GE MEDICAL SYSTEMS"
    ds.InstitutionName = "DIGITS synthetic Sunnybrook"
    ds.StudyDescription = "Synthetic cardiac cine MR (DIGITS Core)"
    ds.PatientName = case
    ds.PatientID = case
    ds.PatientBirthDate = ""
    ds.PatientSex = "O"
    ds.ScanningSequence = "GR"
    ds.SequenceVariant = "SS"
    ds.MRAcquisitionType = "2D"
    ds.MagneticFieldStrength = 1.5
    ds.SliceThickness = 8
    ds.RepetitionTime = 3.5
    ds.EchoTime = 1.5
    ds.FlipAngle = 45
    ds.CardiacNumberOfImages = PHASES_PER_SLICE
    ds.StudyInstanceUID = study_uid
    ds.StudyID = "1"
    ds.FrameOfReferenceUID = uid(seed, case, "frame")
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.Rows = size
    ds.Columns = size
    spacing = round(1.25 * 256 / size, 4)
    ds.PixelSpacing = [spacing, spacing]
    ds.BitsAllocated = 16
    ds.BitsStored = 12
    ds.HighBit = 11
    ds.PixelRepresentation = 0
    ds.WindowCenter = 600
    ds.WindowWidth = 1200
    ds.AcquisitionNumber = 1
    return ds


class _FastWriter:
    """Writes many files of one series: the elements that stay the same are encoded once.

    The bytes are what ``pydicom.dcmwrite(path, ds, enforce_file_format=True)``
    writes for explicit VR little endian (a test checks this), about 5x faster.
    """

    _VARYING = ("SOPInstanceUID", "InstanceNumber", "ImagePositionPatient", "SliceLocation", "TriggerTime", "PixelData")

    def __init__(self, ds):
        from pydicom.datadict import tag_for_keyword

        self.ds = ds
        self.varying = {tag_for_keyword(k) for k in self._VARYING}
        self.fixed = {int(elem.tag): self._encode(elem) for elem in ds if int(elem.tag) not in self.varying}
        meta = ds.file_meta
        self.meta_fixed = {
            int(elem.tag): self._encode(elem)
            for elem in meta
            if elem.keyword not in ("FileMetaInformationGroupLength", "MediaStorageSOPInstanceUID")
        }

    @staticmethod
    def _encode(elem) -> bytes:
        from pydicom.filebase import DicomBytesIO
        from pydicom.filewriter import write_data_element

        fp = DicomBytesIO()
        fp.is_little_endian = True
        fp.is_implicit_VR = False
        write_data_element(fp, elem)
        return fp.getvalue()

    def write(self, path: Path) -> None:
        ds = self.ds
        meta = dict(self.meta_fixed)
        meta[0x00020003] = self._encode(ds.file_meta["MediaStorageSOPInstanceUID"])
        meta_bytes = b"".join(meta[t] for t in sorted(meta))
        elements = dict(self.fixed)
        for tag in self.varying:
            if tag in ds:
                elements[tag] = self._encode(ds[tag])
        body = b"".join(elements[t] for t in sorted(elements))
        group_length = struct.pack("<HH2sHI", 0x0002, 0x0000, b"UL", 4, len(meta_bytes))
        path.write_bytes(b"\x00" * 128 + b"DICM" + group_length + meta_bytes + body)


def write_series(
    ds,
    folder: Path,
    series: str,
    description: str,
    series_uid: str,
    orientation,
    origin,
    slice_gap: float,
    images,
    seed,
) -> int:
    """Write one series into ``folder``; ``images`` yields (slice_index, phase, number, uint16 array).

    Returns:
        The number of files written.
    """
    row, col = orientation
    normal = np.cross(row, col)
    ds.SeriesInstanceUID = series_uid
    ds.SeriesNumber = int(series)
    ds.SeriesDescription = description
    ds.ImageOrientationPatient = [round(float(v), 6) for v in (*row, *col)]
    writer = None
    count = 0
    for slice_index, phase, number, pixels in images:
        sop = f"{series_uid}.{number}"
        position = origin + slice_index * slice_gap * normal
        ds.SOPInstanceUID = sop
        ds.file_meta.MediaStorageSOPInstanceUID = sop
        ds.InstanceNumber = number
        ds.ImagePositionPatient = [round(float(v), 4) for v in position]
        ds.SliceLocation = round(float(np.dot(position, normal)), 4)
        ds.TriggerTime = round(phase * 1000.0 / PHASES_PER_SLICE, 1)
        ds.PixelData = np.ascontiguousarray(pixels, dtype="<u2").tobytes()
        ds["PixelData"].VR = "OW"
        if writer is None:
            writer = _FastWriter(ds)
        writer.write(folder / image_filename(series, number))
        count += 1
    return count
