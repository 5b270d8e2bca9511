"""DIGITS data plugins for 3-D medical volumes: ``msd-volumes``, ``nifti-volumes`` and ``dicom-series``.

See :mod:`.ingestion` (the plugins), :mod:`.geometry` (NIfTI and DICOM series
reading, canonical orientation), :mod:`.preprocess` (resampling and
normalisation) and :mod:`.synth` (a synthetic Decathlon-layout generator that
also writes every case as a DICOM series).
"""
