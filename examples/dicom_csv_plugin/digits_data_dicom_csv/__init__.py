"""DICOM images + CSV labels: a DIGITS data plugin (id ``dicom-csv``)."""

from .ingestion import DicomCsvIngestion

__all__ = ["DicomCsvIngestion"]
