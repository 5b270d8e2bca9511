"""A DICOMweb series at inference, for every volume plugin: the inference form, fetching the series, storing its SEG.

Split from :mod:`.pacs` (the ``dicomweb-volumes`` data plugin) so that :mod:`.ingestion`, which every volume plugin
shares, and :mod:`.pacs`, whose plugin is a volume plugin, do not import each other.
"""

from __future__ import annotations

from typing import Any

from wtforms import StringField
from wtforms.validators import Optional, ValidationError

from digits_core import DatasetError
from digits_data_dicomweb.forms import DicomWebInferenceForm, check_server_url
from digits_data_dicomweb.servers import named_servers
from digits_data_dicomweb.source import DicomWebError, public_url

from .forms import SERIES_PREFIX
from .geometry import VolumeFormatError


class VolumeInferenceForm(DicomWebInferenceForm):
    """A DICOMweb series to segment with a volume model (every field optional: files need none of them)."""

    dicomweb_series = StringField(
        "Series UID",
        default="",
        validators=[Optional()],
        description="SeriesInstanceUID of an image series on the DICOMweb server to segment as one volume.",
    )
    dicomweb_server = StringField(
        "Server",
        default="",
        validators=[Optional()],
        description="A server the operator named (digits serve --dicomweb-server "
        "NAME=URL); default: the dataset's server.",
    )
    dicomweb_url = StringField(
        "DICOMweb URL",
        default="",
        validators=[Optional()],
        description="The DICOMweb root holding the series (default: the server of a dicomweb-volumes dataset).",
    )
    dicomweb_username = StringField(
        "User name", default="", validators=[Optional()], description="For HTTP basic authentication on --dicomweb-url."
    )

    def validate_dicomweb_series(self, field):
        if str(field.data or "").strip():
            super().validate_dicomweb_series(field)

    def validate_dicomweb_server(self, field):
        name = str(field.data or "").strip()
        if name and name not in named_servers():
            raise ValidationError(
                f'"{name[:40]}" is not a server this DIGITS was started with (digits serve --dicomweb-server NAME=URL)'
            )

    def validate_dicomweb_url(self, field):
        # As the dataset form's server_url: refused on its field before any request leaves (empty: the dataset's).
        check_server_url(field, self.dicomweb_server.data, required=False)


def _source(userdata: dict):
    from digits_data_dicomweb.ingestion import open_source

    try:
        return open_source(userdata)
    except DicomWebError as exc:
        raise DatasetError(str(exc)) from None


def fetch_inference_series(userdata: dict, series_uid: str) -> tuple[Any, list]:
    """Fetch the slices of a series named at inference into the cache; return the source and their files.

    Raises:
        VolumeFormatError: The server has no such series, or refuses it.
    """
    try:
        source = _source(userdata)
        series = source.locate_series(series_uid, str(userdata.get("dicomweb_study") or "").strip())
        refs = source.series_instances(series)
        errors = source.fetch_all(refs)
        if errors:
            raise DicomWebError(next(iter(errors.values())))
        if not refs:
            raise DicomWebError(f"series {series_uid} on {public_url(source.url)} has no instances")
        return source, [source.cache_path(ref.sop) for ref in refs]
    except (DicomWebError, DatasetError) as exc:
        raise VolumeFormatError(f"{SERIES_PREFIX}{series_uid}: {exc}") from None


def open_server(userdata: dict):
    """The DICOMweb server the values name (an inference form's, or a ``dicomweb-volumes`` dataset's), or ``None``.

    Raises:
        DatasetError: A named server that does not exist, or a URL the outbound guard refuses.
    """
    keys = ("dicomweb_url", "dicomweb_server", "server_url", "named_server")
    return _source(userdata) if any(str(userdata.get(k) or "").strip() for k in keys) else None


def store_seg(source, seg) -> str:
    """Store a result's DICOM-SEG on the server it came from (STOW-RS); the note for the user.

    Raises:
        DicomWebError: The server refused it.
    """
    source.store([seg])
    return (
        f"Stored the DICOM-SEG ({int(seg.NumberOfFrames)} frames) as series {seg.SeriesInstanceUID} "
        f"on {public_url(source.url)}"
    )


__all__ = ["SERIES_PREFIX", "VolumeInferenceForm", "fetch_inference_series", "open_server", "store_seg"]
