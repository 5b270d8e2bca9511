"""DIGITS data plugin ``dicomweb-segmentation``: segmentation datasets from a PACS over DICOMweb.

- :mod:`.source`: :class:`DicomWebSource`, a reusable QIDO-RS / WADO-RS / STOW-RS client with a local cache.
- :mod:`.seg`: DICOM-SEG label maps in, DICOM-SEG from predicted masks out (highdicom).
- :mod:`.ingestion`: the data plugin.
- :mod:`.orthanc`: start a local Orthanc (DICOMweb, basic auth, 127.0.0.1 only) for tests and trials.
- :mod:`.synth`: synthetic cardiac MR studies with DICOM-SEG ground truth.
"""

from .source import DicomWebError, DicomWebSource, InstanceRef, StudyQuery

__all__ = ["DicomWebSource", "DicomWebError", "StudyQuery", "InstanceRef"]
