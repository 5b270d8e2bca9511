"""DICOM + CSV: a folder of DICOM images and a CSV of labels -> a classification dataset.

The example plugin of the DIGITS Core guide ``docs/writing-plugins.md``.
Images are read with ``digits_data_sunnybrook.dicom``, which applies
RescaleSlope/RescaleIntercept, inverts MONOCHROME1, fixes the byte order,
checks the required tags and names the file in every error. The split into
training and validation is by patient (``PatientID``), so the same patient
never appears on both sides. For inference, the inference form names a
DICOM file or a folder of them.
"""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path

from digits_core import DataIngestion, DatasetError

from .forms import DatasetForm, InferenceForm
from .labels import read_labels

PACKAGE = __name__.rsplit(".", 1)[0]
#: What to install when files use a compressed transfer syntax without a decoder.
CODECS_HINT = 'pip install "digits-data-sunnybrook[codecs]"'


class DicomCsvIngestion(DataIngestion):
    """Builds a classification dataset from DICOM files listed with their class in a CSV."""

    plugin_id = "dicom-csv"
    title = "DICOM images + CSV labels"
    category = "Images"

    def __init__(self, is_inference_db=False, **form_data):
        super().__init__(is_inference_db=is_inference_db, **form_data)
        self._splits = None  # stage -> entries, computed once by itemize_entries

    @staticmethod
    def get_dataset_form():
        """Return the dataset form class."""
        return DatasetForm

    @staticmethod
    def get_dataset_template(form):
        """Return the dataset form's Jinja2 layout."""
        return DataIngestion.template_from_package(PACKAGE, "templates/dataset.html", form=form)

    @staticmethod
    def get_inference_form():
        """Return the inference form class: DICOM files to classify."""
        return InferenceForm

    @staticmethod
    def get_inference_template(form):
        """Return the inference form's Jinja2 layout."""
        return DataIngestion.template_from_package(PACKAGE, "templates/inference.html", form=form)

    def itemize_entries(self, stage):
        """Return ``(path, class index)`` entries of ``stage`` (train/val; no test).

        For inference (``is_inference_db``), stage ``"test"`` lists the
        chosen DICOM files as ``(path, None)``: no known class.
        """
        if self.is_inference_db:
            if stage != "test":
                return []
            if Path(self.dicom_path).is_dir():
                return [(str(path), None) for path in sorted(Path(self.dicom_path).rglob("*.dcm"))]
            return [(self.dicom_path, None)]
        if self._splits is None:
            self._splits = self._split_by_patient()
        return self._splits.get(stage, [])

    def _split_by_patient(self):
        from digits_data_sunnybrook.dicom import DicomReadError, check_decoders, read_dicom_header

        rows = read_labels(self.labels_csv)
        classes = sorted({label for _, label in rows})
        self.userdata["class_labels"] = classes  # index = class id; views show these names

        by_patient = defaultdict(list)
        for name, label in rows:
            path = str(Path(self.dicom_folder).joinpath(*name.replace("\\", "/").split("/")))
            try:
                patient = str(read_dicom_header(path).get("PatientID") or "") or path
            except DicomReadError:
                patient = path  # encode_entry reports the file; the job goes on
            by_patient[patient].append((path, classes.index(label)))
        # Fail before any work if some files need a codec that is not installed.
        check_decoders([path for entries in by_patient.values() for path, _ in entries], install_hint=CODECS_HINT)

        patients = sorted(by_patient)
        random.Random(self.seed).shuffle(patients)
        wanted, val = round(len(rows) * self.percent_val / 100), []
        while patients and sum(len(by_patient[p]) for p in val) < wanted:
            val.append(patients.pop())
        if not patients:
            raise DatasetError(
                f"{self.labels_csv}: {len(val)} patient(s) are too few for {self.percent_val}% validation; "
                "lower --percent-val or add patients."
            )
        splits = {
            "train": [entry for p in patients for entry in by_patient[p]],
            "val": [entry for p in val for entry in by_patient[p]],
        }
        # Record the split (counts only: PatientIDs can be sensitive).
        self.userdata["split"] = {
            stage: {"patients": len(group), "images": len(splits[stage])}
            for stage, group in (("train", patients), ("val", val))
        }
        return splits

    def encode_entry(self, entry):
        """Read one DICOM file: ``(H x W x 1 array, class index or None)``.

        The array keeps the rescaled values (e.g. int16 Hounsfield units for
        CT); a file that is not a usable image raises ``DicomReadError``
        naming it, which puts it in the dataset's errors report.
        """
        from digits_data_sunnybrook.dicom import read_dicom_image

        path, label = entry
        return read_dicom_image(path), label
