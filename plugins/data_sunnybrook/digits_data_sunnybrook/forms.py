"""The dataset and inference forms of the ``image-sunnybrook`` plugin (WTForms).

The same forms serve the web page, ``digits dataset create image-sunnybrook
--image-folder ... --contour-folder ...`` and the Python API. Folder fields
check that the folder exists, is readable and holds what is expected, and
say what was found instead.
"""

from __future__ import annotations

from pathlib import Path

from wtforms import FileField, Form, IntegerField, SelectField, StringField
from wtforms.validators import InputRequired, NumberRange, Optional, ValidationError

from digits_core import select_choices
from digits_core.paths import server_path_allowed

from .layout import CASE_RE, IMAGE_RE, find_contour_cases, parse_series_override

#: How many names to show when describing what a folder holds.
_SHOW = 6


def _describe_folder(folder: Path) -> str:
    if not server_path_allowed(folder):  # on the web server, never list a folder outside its data roots
        return "it is outside the server's data roots"
    try:
        names = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
    except OSError as exc:
        return f"it cannot be listed ({exc.strerror or exc})"
    if not names:
        return "it is empty"
    shown = ", ".join(names[:_SHOW]) + (f", ... ({len(names)} entries)" if len(names) > _SHOW else "")
    return f"it holds: {shown}"


def _existing_folder(value: str | None, what: str) -> Path:
    if not value or not str(value).strip():
        raise ValidationError(f"give the {what}")
    folder = Path(str(value).strip()).expanduser()
    if not server_path_allowed(folder):  # on the web server: nothing is said about paths outside its roots
        raise ValidationError(f"{folder} is outside the server's data roots")
    if not folder.exists():
        parent = folder.parent
        hint = (
            f" ({parent} exists; {_describe_folder(parent)})"
            if parent.is_dir() and str(parent) not in ("", ".")
            else ""
        )
        raise ValidationError(f"{folder} does not exist{hint}")
    if not folder.is_dir():
        raise ValidationError(f"{folder} is a file, not a folder")
    try:
        next(iter(folder.iterdir()), None)
    except OSError as exc:
        raise ValidationError(f"{folder} cannot be read ({exc.strerror or exc})") from None
    return folder


def image_cases(folder: Path) -> dict[str, Path]:
    """Case folders (``SC-...``) under an image folder that hold ``IM-SSSS-NNNN.dcm`` files."""
    cases = {}
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and CASE_RE.match(p.name)):
        try:
            if any(IMAGE_RE.match(f.name) for f in sub.iterdir()):
                cases[sub.name] = sub
        except OSError:
            continue
    return cases


def check_image_folder(value: str | None) -> dict[str, Path]:
    """Validate an image folder (``challenge_training``); return its case folders.

    Raises:
        ValidationError: With what was found instead.
    """
    folder = _existing_folder(value, "image folder (e.g. challenge_training)")
    cases = image_cases(folder)
    if cases:
        return cases
    nested = [p.name for p in sorted(folder.iterdir()) if p.is_dir() and image_cases(p)]
    hint = f"; did you mean {folder / nested[0]}?" if nested else ""
    raise ValidationError(
        f"{folder} has no case folders (like SC-HF-I-1) holding IM-SSSS-NNNN.dcm files; {_describe_folder(folder)}{hint}"
    )


def check_contour_folder(value: str | None, kind: str = "i") -> dict[str, Path]:
    """Validate a contour folder (``...ContoursPart3`` or ``TrainingDataContours``); return its cases.

    Raises:
        ValidationError: With what was found instead.
    """
    folder = _existing_folder(value, "contour folder (e.g. Sunnybrook Cardiac MR Database ContoursPart3)")
    cases = find_contour_cases(folder)
    if not cases:
        raise ValidationError(
            f"{folder} has no case folders (like SC-HF-I-01) with contours-manual/IRCCI-expert inside; "
            f"{_describe_folder(folder)}"
        )
    pattern = f"-{kind}contour-manual.txt"
    if not any(any(f.name.endswith(pattern) for f in expert.iterdir()) for expert in cases.values()):
        raise ValidationError(f"{folder} has {len(cases)} contour case folder(s) but no *{pattern} files")
    return cases


class SunnybrookDatasetForm(Form):
    """Options of a Sunnybrook left-ventricle segmentation dataset."""

    image_folder = StringField(
        "Image folder",
        validators=[InputRequired()],
        description="The challenge_training folder (one folder per case, e.g. SC-HF-I-1, of IM-SSSS-NNNN.dcm files).",
    )
    contour_folder = StringField(
        "Contour folder",
        validators=[InputRequired()],
        description="The 'Sunnybrook Cardiac MR Database ContoursPart3' folder or its TrainingDataContours folder.",
    )
    channel_conversion = SelectField(
        "Channel conversion",
        choices=select_choices([("L", "Grayscale"), ("RGB", "RGB (gray repeated 3 times)")]),
        default="L",
        description="Grayscale keeps one channel; RGB repeats it (e.g. for ImageNet-pretrained networks).",
    )
    pct_val = IntegerField(
        "% for validation",
        default=10,
        validators=[InputRequired(), NumberRange(min=0, max=90)],
        description="Share of the cases (patients, not images) held out for validation.",
    )
    contour_type = SelectField(
        "Contour type",
        choices=select_choices([("i", "Inner (endocardium: left-ventricle cavity)"), ("o", "Outer (epicardium)")]),
        default="i",
        description="Which expert contour becomes the label mask.",
    )
    seed = IntegerField("Seed", default=0, validators=[InputRequired()], description="Seed of the case split.")
    series_override = StringField(
        "Case to series override",
        default="",
        validators=[Optional()],
        description="Optional CASE=SERIES pairs, comma separated (e.g. SC-HF-I-1=0004). "
        "Cases not listed use the shipped table, then automatic detection.",
    )

    def validate_image_folder(self, field):
        check_image_folder(field.data)

    def validate_contour_folder(self, field):
        kind = (
            self.contour_type.data if self.contour_type.data in ("i", "o") else "i"
        )  # a bad kind is reported on its own field
        contour_cases = check_contour_folder(field.data, kind)
        try:
            images = check_image_folder(self.image_folder.data)
        except ValidationError:
            return  # reported on the image field
        common = set(contour_cases) & set(images)
        if not common:
            raise ValidationError(
                f"none of its {len(contour_cases)} contour cases ({', '.join(list(contour_cases)[:4])}...) "
                f"has an image folder in {self.image_folder.data} (which has {', '.join(list(images)[:4])}...)"
            )

    def validate_series_override(self, field):
        try:
            parse_series_override(field.data)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None


class SunnybrookInferenceForm(Form):
    """Inference input: a DICOM file, or a record of the dataset's validation set."""

    dicom_file = StringField(
        "DICOM file",
        default="",
        description="Path of one DICOM image to segment.",
    )
    dicom_upload = FileField(
        "Or upload a DICOM file",
        description="The web page stores the uploaded file in the model job folder and segments it.",
    )
    validation_record = StringField(
        "Validation record",
        default="",
        description="Or a record of the dataset's validation set: its index (0, 1, ...) or CASE/NUMBER "
        "(e.g. SC-HF-I-1/0021); its contour is shown as ground truth.",
    )

    def validate_dicom_file(self, field):
        if field.data and field.data.strip():
            path = Path(field.data.strip()).expanduser()
            if not path.is_file():
                raise ValidationError(f"{path} is not a file" if path.exists() else f"{path} does not exist")

    def validate_validation_record(self, field):
        upload = self.dicom_upload.data
        uploaded = bool(getattr(upload, "filename", None)) or (isinstance(upload, str) and bool(upload.strip()))
        file_given = bool(self.dicom_file.data and self.dicom_file.data.strip())
        if file_given and uploaded:
            raise ValidationError("give a DICOM file path or an upload, not both")
        given = [file_given or uploaded, bool(field.data and field.data.strip())]
        if given == [False, False]:
            raise ValidationError("give a DICOM file or a validation record")
        if all(given):
            raise ValidationError("give a DICOM file or a validation record, not both")
