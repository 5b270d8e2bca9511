"""DIGITS data plugins for 3-D medical volumes: ``msd-volumes``, ``nifti-volumes``, ``dicom-series``, ``dicomweb-volumes``.

See :mod:`.ingestion` (the plugins), :mod:`.pacs` (``dicomweb-volumes``: one case per series of a
DICOMweb server; DICOMweb series at inference and the SEG stored back), :mod:`.geometry` (NIfTI and DICOM series
reading, canonical orientation), :mod:`.preprocess` (resampling and
normalisation) and :mod:`.synth` (a synthetic Decathlon-layout generator that
also writes every case as a DICOM series).
"""
