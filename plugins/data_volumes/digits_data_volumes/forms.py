"""The dataset forms of the volume plugins (WTForms): one set of preprocessing fields, three kinds of source.

The same forms serve the web page, ``digits dataset create msd-volumes
--data-folder ...`` and the Python API. Folder fields go through the path
gate (:func:`digits_core.paths.check_server_path`) and say what is missing.
"""

from __future__ import annotations

from pathlib import Path

from wtforms import FloatField, Form, IntegerField, SelectField, StringField
from wtforms.validators import InputRequired, NumberRange, Optional, ValidationError

from digits_core import select_choices
from digits_core.errors import FormValidationError
from digits_core.paths import check_server_path

from .preprocess import CT_WINDOW, NORMALIZATIONS, parse_spacing

#: How an inference input names a series on the DICOMweb server (``dicomweb:<SeriesInstanceUID>``).
SERIES_PREFIX = "dicomweb:"


def existing_folder(value: str | None, what: str, field: str = "folder") -> Path:
    """Check a folder field: given, allowed by the path gate, an existing folder.

    Raises:
        ValidationError: With what is wrong.
    """
    if not value or not str(value).strip():
        raise ValidationError(f"give the {what}")
    try:
        folder = check_server_path(str(value).strip(), field)
    except FormValidationError:
        raise ValidationError(f"{value} is outside the server's data roots") from None
    if not folder.is_dir():
        raise ValidationError(f"{folder} is not a folder" if folder.exists() else f"{folder} does not exist")
    return folder


def _check_spacing(form, field) -> None:
    try:
        parse_spacing(field.data)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None


class VolumePreprocessingForm(Form):
    """Fields every volume plugin shares: resampling, normalisation, the case split."""

    target_spacing = StringField(
        "Target spacing (mm, D,H,W)",
        default="median",
        validators=[_check_spacing],
        description='Resample every case to this voxel spacing: "median" (the median of the cases, '
        "as nnU-Net does) or D,H,W in mm such as 2.5,1.25,1.25. Labels use nearest neighbour.",
    )
    normalization = SelectField(
        "Intensity normalisation",
        choices=select_choices(NORMALIZATIONS),
        default="auto",
        description="auto: CT window for CT, z-score per case otherwise; none keeps the stored voxels.",
    )
    window_low = FloatField("CT window low (HU)", default=CT_WINDOW[0], validators=[Optional()])
    window_high = FloatField("CT window high (HU)", default=CT_WINDOW[1], validators=[Optional()])
    pct_val = IntegerField(
        "Validation cases (%)",
        default=20,
        validators=[InputRequired(), NumberRange(0, 90)],
        description="Share of the cases held out for validation (split by case).",
    )
    seed = IntegerField("Seed", default=0, validators=[InputRequired()], description="Seed of the case split.")

    def validate_window_high(self, field) -> None:
        if self.window_low.data is not None and field.data is not None and field.data <= self.window_low.data:
            raise ValidationError("window_high must be above window_low")


class MsdDatasetForm(VolumePreprocessingForm):
    """``msd-volumes``: a Medical Segmentation Decathlon task folder."""

    data_folder = StringField(
        "Task folder",
        validators=[InputRequired()],
        description="A Decathlon task folder holding dataset.json, imagesTr/ and labelsTr/ (e.g. Task02_Heart).",
    )

    def validate_data_folder(self, field) -> None:
        folder = existing_folder(field.data, "Decathlon task folder", "data_folder")
        if not (folder / "dataset.json").is_file():
            raise ValidationError(f"{folder} has no dataset.json; give the task folder (e.g. Task02_Heart)")


class NiftiDatasetForm(VolumePreprocessingForm):
    """``nifti-volumes``: a folder of images and a folder of labels matched by file name, or a CSV of pairs."""

    image_folder = StringField(
        "Image folder",
        description="NIfTI images (.nii or .nii.gz), one case per file (or give a CSV "
        "of pairs instead of the two folders).",
    )
    label_folder = StringField(
        "Label folder", description="NIfTI label volumes with the same file names as the images."
    )
    pairs_file = StringField(
        "CSV of pairs",
        validators=[Optional()],
        description="Instead of the folders: a CSV file with one case per line, image,label (NIfTI paths, "
        "absolute or relative to the CSV's folder; a first line image,label is a header). The case "
        "is named after the image file.",
    )
    modality = SelectField(
        "Modality",
        choices=select_choices(["MR", "CT", "other"]),
        default="MR",
        description="Picks the normalisation when it is auto.",
    )

    def _folder(self, field, what: str) -> None:
        if self.pairs_file.data and str(self.pairs_file.data).strip():
            if field.data and str(field.data).strip():
                raise ValidationError(
                    f"give either the two folders or the CSV of pairs (pairs_file), not both; leave the {what} empty"
                )
            return
        if not field.data or not str(field.data).strip():
            raise ValidationError(f"give the {what} (or a CSV of image,label pairs in pairs_file)")
        existing_folder(field.data, what, field.name)

    def validate_image_folder(self, field) -> None:
        self._folder(field, "image folder")

    def validate_label_folder(self, field) -> None:
        self._folder(field, "label folder")

    def validate_pairs_file(self, field) -> None:
        try:
            path = check_server_path(str(field.data).strip(), "pairs_file")
        except FormValidationError:
            raise ValidationError(f"{field.data} is outside the server's data roots") from None
        if not path.is_file():
            raise ValidationError(f"{path} is not a file" if path.exists() else f"{path} does not exist")


class DicomSeriesDatasetForm(VolumePreprocessingForm):
    """``dicom-series``: one folder per DICOM series (at any depth), labels named after the series folders."""

    series_folder = StringField(
        "Series folder",
        validators=[InputRequired()],
        description="A folder of series folders (one DICOM series each, any file names), one level deep or a "
        "tree such as PATIENT/STUDY/SERIES as a PACS exports it (every folder holding files is a "
        "series; a DICOMDIR is skipped). A case is named after its path, e.g. PATIENT_STUDY_SERIES.",
    )
    label_folder = StringField(
        "Label folder",
        validators=[InputRequired()],
        description="Label volumes named after the series: CASE.nii.gz on the series' voxel grid, or CASE.dcm, a "
        "DICOM-SEG drawn on the series; for a tree, PATIENT/STUDY/SERIES.nii.gz (the same path) or "
        "PATIENT_STUDY_SERIES.nii.gz.",
    )

    def validate_series_folder(self, field) -> None:
        existing_folder(field.data, "series folder", "series_folder")

    def validate_label_folder(self, field) -> None:
        existing_folder(field.data, "label folder", "label_folder")
