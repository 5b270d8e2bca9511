"""The forms of ``dicom-csv``: the dataset form (files, labels, split) and the inference form."""

from __future__ import annotations

import os

from wtforms import Form, IntegerField, StringField
from wtforms.validators import DataRequired, InputRequired, NumberRange, ValidationError

from .labels import read_labels


class DatasetForm(Form):
    """One form for the web page, ``digits dataset create dicom-csv --<field>`` and the API."""

    dicom_folder = StringField(
        "DICOM folder",
        validators=[DataRequired()],
        description="Folder holding the DICOM files (the CSV's paths are relative to it)",
    )
    labels_csv = StringField(
        "Labels CSV",
        validators=[DataRequired()],
        description="CSV file with a header row 'file,label' and one row per DICOM file",
    )
    percent_val = IntegerField(
        "% for validation",
        default=25,
        validators=[InputRequired(), NumberRange(min=0, max=90)],
        description="Share of the images used for validation (whole patients go to one side)",
    )
    seed = IntegerField("Seed", default=0, validators=[InputRequired()], description="Seed of the random split")

    def validate_dicom_folder(self, field):
        """The folder must exist; its path is stored absolute."""
        path = os.path.abspath(os.path.expanduser(field.data))
        if not os.path.isdir(path):
            raise ValidationError(f"{path} is not a folder")
        field.data = path

    def validate_labels_csv(self, field):
        """The CSV must be readable and name at least two classes."""
        path = os.path.abspath(os.path.expanduser(field.data))
        if not os.path.isfile(path):
            raise ValidationError(f"{path} is not a file")
        try:
            rows = read_labels(path)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ValidationError(str(exc)) from None
        classes = sorted({label for _, label in rows})
        if len(classes) < 2:
            raise ValidationError(f"{path} names only the class {classes[0]!r}; a classifier needs two or more")
        field.data = path


class InferenceForm(Form):
    """What to classify with a model trained on a ``dicom-csv`` dataset."""

    dicom_path = StringField(
        "DICOM file or folder",
        validators=[DataRequired()],
        description="A DICOM file, or a folder: every .dcm file in it and its sub-folders",
    )

    def validate_dicom_path(self, field):
        """The file or folder must exist; its path is stored absolute."""
        path = os.path.abspath(os.path.expanduser(field.data))
        if not os.path.exists(path):
            raise ValidationError(f"{path} does not exist")
        field.data = path
