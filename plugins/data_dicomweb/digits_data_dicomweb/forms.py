"""The dataset and inference forms of the ``dicomweb-segmentation`` plugin (WTForms).

The same forms serve the web page, ``digits dataset create dicomweb-segmentation --server-url ...`` and
the Python API. Password and token are ``PasswordField`` values: the core never writes them to disk
(:mod:`digits_core.form_secrets`), so a job run again later, or an inference, asks for them again
(or reads ``$DIGITS_DICOMWEB_PASSWORD`` / ``$DIGITS_DICOMWEB_TOKEN``).
"""

from __future__ import annotations

import re

from wtforms import BooleanField, Form, IntegerField, PasswordField, SelectField, StringField
from wtforms.validators import InputRequired, NumberRange, Optional, ValidationError

from digits_core import select_choices
from digits_core.outbound import OutboundURLError, check_url

from .servers import server_choices

_DATE = re.compile(r"^\d{8}$")
_UID = re.compile(r"^[0-9]+(\.[0-9]+)*$")


def split_list(value: str | None) -> tuple[str, ...]:
    """``"a, b c"`` -> ``("a", "b", "c")`` (commas or white space separate)."""
    return tuple(part for part in re.split(r"[,\s]+", str(value or "").strip()) if part)


def _check_url(field) -> None:
    value = str(field.data or "").strip()
    if not value.startswith(("http://", "https://")):
        raise ValidationError("give the DICOMweb root URL, e.g. http://127.0.0.1:8042/dicom-web")
    if "@" in value.split("/")[2]:
        raise ValidationError("put the user name and password in their own fields, not in the URL")


def _check_uids(field) -> None:
    bad = [uid for uid in split_list(field.data) if not _UID.match(uid) or len(uid) > 64]
    if bad:
        raise ValidationError(f"not a DICOM UID (digits and dots, at most 64 characters): {bad[0][:70]}")


def check_server_url(field, named_server: str | None = "", *, required: bool = True) -> None:
    """Validate a typed DICOMweb URL field on the form, before any request leaves (any form's URL field).

    Nothing to check when the operator's named server is chosen (its URL is the operator's). Otherwise
    the URL must be an ``http(s)://`` root without credentials in it, and, on the web server, lead
    where the operator allows outbound requests (:func:`digits_core.outbound.check_url`: loopback,
    link-local and private addresses need ``digits serve --allow-url``).

    Args:
        field: The bound URL field (its ``short_name`` is named in the outbound guard's message).
        named_server: The form's named-server choice (``""``: none).
        required: Whether an empty URL is an error (``False``: empty means "the dataset's server").

    Raises:
        ValidationError: On ``field``.
    """
    if str(named_server or "").strip():
        return  # a named server: its URL is the operator's
    if not str(field.data or "").strip():
        if required:
            raise ValidationError("give the DICOMweb root URL, or choose a server")
        return
    _check_url(field)
    try:
        check_url(field.data, field.short_name)  # on the web server: before any request leaves
    except OutboundURLError as exc:
        raise ValidationError(str(exc).removeprefix(f"{field.short_name}: ")) from None


class _ServerFields(Form):
    named_server = SelectField(
        "Server",
        choices=lambda: select_choices(server_choices()),
        default="",
        description="A server the operator named (digits serve --dicomweb-server NAME=URL), or the URL typed below.",
    )
    server_url = StringField(
        "DICOMweb URL",
        default="",
        description="The server's DICOMweb root, e.g. http://127.0.0.1:8042/dicom-web (Orthanc). On the web "
        "server, loopback and private addresses need the operator's digits serve --allow-url.",
    )
    username = StringField("User name", default="", description="For HTTP basic authentication (empty: none).")
    password = PasswordField("Password", description="Never written to disk; give it again to run the job again.")
    token = PasswordField("Bearer token", description="Instead of user name and password (never written to disk).")

    def validate_server_url(self, field):
        check_server_url(field, self.named_server.data)


class DicomWebDatasetForm(_ServerFields):
    """Options of a segmentation dataset fetched from a PACS over DICOMweb."""

    modality = StringField("Modality", default="", description="Only studies holding this modality (e.g. MR, CT).")
    study_description = StringField(
        "Study description",
        default="",
        description="Only studies whose description matches (wildcards * and ? allowed).",
    )
    series_description = StringField(
        "Series description", default="", description="Only image series whose description matches (wildcards allowed)."
    )
    date_from = StringField("Studies from", default="", description="First study date, YYYYMMDD.")
    date_to = StringField("Studies until", default="", description="Last study date, YYYYMMDD.")
    patient_ids = StringField("Patients", default="", description="Only these Patient IDs (comma separated).")
    study_uids = StringField(
        "Studies", default="", description="Only these StudyInstanceUIDs (comma or space separated)."
    )
    channel_conversion = SelectField(
        "Channel conversion",
        choices=select_choices([("L", "Grayscale"), ("RGB", "RGB (gray repeated)")]),
        default="L",
        description="Grayscale keeps one channel; RGB repeats it.",
    )
    pct_val = IntegerField(
        "% for validation",
        default=10,
        validators=[InputRequired(), NumberRange(min=0, max=90)],
        description="Share of the patients (not images) held out for validation.",
    )
    seed = IntegerField("Seed", default=0, validators=[InputRequired()], description="Seed of the patient split.")
    max_parallel = IntegerField(
        "Parallel requests",
        default=4,
        validators=[InputRequired(), NumberRange(min=1, max=32)],
        description="Most WADO-RS requests in flight at once.",
    )
    cache_folder = StringField(
        "Cache folder",
        default="",
        validators=[Optional()],
        description="Where fetched instances are kept (default: ~/.cache/digits/dicomweb).",
    )

    def validate_date_from(self, field):
        if field.data and not _DATE.match(field.data.strip()):
            raise ValidationError("write the date as YYYYMMDD, e.g. 20090101")

    validate_date_to = validate_date_from

    def validate_study_uids(self, field):
        _check_uids(field)


class DicomWebInferenceForm(Form):
    """Inference input: a series on the DICOMweb server the dataset came from."""

    dicomweb_series = StringField(
        "Series UID",
        default="",
        validators=[InputRequired()],
        description="SeriesInstanceUID of the image series to segment.",
    )
    dicomweb_study = StringField(
        "Study UID",
        default="",
        validators=[Optional()],
        description="Its StudyInstanceUID (found by a search when empty).",
    )
    store = BooleanField(
        "Store the result in the PACS",
        default=False,
        description="Write the predicted masks back as a DICOM-SEG series (STOW-RS).",
    )
    dicomweb_password = PasswordField(
        "Password",
        description="The server's password, needed again since it is never "
        "stored (or set $DIGITS_DICOMWEB_PASSWORD instead of typing it on a command line).",
    )
    dicomweb_token = PasswordField("Bearer token", description="Or a bearer token (or $DIGITS_DICOMWEB_TOKEN).")

    def validate_dicomweb_series(self, field):
        _check_uids(field)
        if len(split_list(field.data)) != 1:
            raise ValidationError("give one SeriesInstanceUID")

    def validate_dicomweb_study(self, field):
        _check_uids(field)


__all__ = ["DicomWebDatasetForm", "DicomWebInferenceForm", "check_server_url", "split_list"]
