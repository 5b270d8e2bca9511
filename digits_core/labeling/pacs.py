"""Pools of images on a PACS (DICOMweb): listed, read and given proposals through a data plugin.

The core names no plugin package: a pool source ``{"kind": "dicomweb", "plugin": ID, ...}`` is served by the
data plugin ``ID`` (default ``dicomweb-segmentation``) through the optional pool capability of the
:class:`~digits_core.interfaces.data.DataIngestion` interface (plugin API 1.3): ``pool_candidates`` lists the
image instances of the studies/series the filters name that hold no DICOM-SEG made by DIGITS Core,
``pool_image`` reads one over WADO-RS, ``pool_store_proposal`` stores a proposal as a DICOM-SEG series
(STOW-RS) referencing it.

:func:`create_dicomweb_pool` lists before anything is written: an unreachable server, a named series that is
not an image, or filters that match no unlabelled image raise :class:`~digits_core.labeling.pool.PoolError`
naming the server, and no pool is made. A typed URL passes the operator's outbound rules
(:func:`digits_core.outbound.check_url`) first; a server named with ``digits serve --dicomweb-server`` is the
operator's own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..errors import DigitsError
from ..interfaces.data import CapabilityNotSupportedError
from ..outbound import check_url
from ..plugins.registry import registry
from .pool import Pool, PoolError, create_pool

#: The data plugin of a DICOMweb pool that names none.
DEFAULT_PLUGIN = "dicomweb-segmentation"
#: The most "left out" lines a pool record keeps from its listing.
MAX_LISTED = 200
#: Pool ``source`` keys :func:`create_dicomweb_pool` writes (no secret among them).
SOURCE_KEYS = ("url", "named_server", "username", "cache_folder", "studies", "series", "modality")


def is_plugin_source(source: dict[str, Any]) -> bool:
    """Whether a pool's ``source`` is read through a data plugin (not a folder)."""
    return source.get("kind") == "dicomweb"


def source_plugin(source: dict[str, Any]) -> Any:
    """The data plugin class that serves a pool ``source``.

    Raises:
        PoolError: The plugin is not installed (named).
    """
    plugin_id = str(source.get("plugin") or DEFAULT_PLUGIN)
    try:
        return registry.get_data_ingestion(plugin_id)
    except DigitsError as exc:
        raise PoolError(f"A DICOMweb pool needs the data plugin {plugin_id}: {exc}") from None


def _where(source: dict[str, Any]) -> str:
    if source.get("named_server"):
        return f'the DICOMweb server "{source["named_server"]}"'
    from urllib.parse import urlsplit

    parts = urlsplit(str(source.get("url") or ""))
    return f"the DICOMweb server {parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}{parts.path}"


def _call(source: dict[str, Any], method: str, *args: Any, **kwargs: Any) -> Any:
    plugin = source_plugin(source)
    try:
        return getattr(plugin, method)(source, *args, **kwargs)
    except CapabilityNotSupportedError as exc:
        raise PoolError(f"{exc} Pick a data plugin that serves {_where(source)}.") from None


def _uid_list(values: Iterable[str] | str | None, field: str) -> list[str]:
    if isinstance(values, str):
        values = values.replace(",", " ").split()
    found = [str(v).strip() for v in (values or ()) if str(v).strip()]
    bad = [v for v in found if len(v) > 64 or not all(c.isdigit() or c == "." for c in v)]
    if bad:
        raise PoolError(f'{field}: "{bad[0][:70]}" is not a DICOM UID (digits and dots).')
    return found


def create_dicomweb_pool(
    name: str,
    *,
    url: str | None = None,
    named_server: str | None = None,
    studies: Iterable[str] | str | None = None,
    series: Iterable[str] | str | None = None,
    modality: str | None = None,
    username: str | None = None,
    cache_folder: str | None = None,
    class_labels: list[str] | None = None,
    plugin: str | None = None,
    jobs_dir: Any = None,
) -> Pool:
    """Create a pool of the unlabelled image instances on a DICOMweb server (every one ``unlabelled``).

    Args:
        name: The pool's name.
        url: The server's DICOMweb root (passes the outbound rules), or
        named_server: a server the operator named (``digits serve --dicomweb-server NAME=URL``).
        studies: Only these StudyInstanceUIDs (default: every study).
        series: Only these SeriesInstanceUIDs (each must be an image series).
        modality: Only series of this modality (e.g. ``MR``); checked against a scoring model's dataset.
        username: HTTP basic user (the password or token comes from the environment, never the record).
        cache_folder: Where fetched instances are cached (default: the plugin's).
        class_labels: Class names (index = class id); default: the scoring model's.
        plugin: The data plugin (default ``dicomweb-segmentation``).
        jobs_dir: The jobs folder.

    Raises:
        OutboundURLError: The operator's rules refuse the URL.
        PoolError: No server given, the server is unreachable, a named series is not an image, or no
            unlabelled image matches (the message names the server); nothing is stored.
    """
    if bool(url) == bool(named_server):
        raise PoolError("A DICOMweb pool needs either a server URL (--dicomweb URL) or a named server, not both.")
    if url:
        check_url(url, "dicomweb")
    source: dict[str, Any] = {
        "kind": "dicomweb",
        "plugin": plugin or DEFAULT_PLUGIN,
        "url": url or None,
        "named_server": named_server or None,
        "username": username or None,
        "cache_folder": cache_folder or None,
        "studies": _uid_list(studies, "study"),
        "series": _uid_list(series, "series"),
        "modality": (modality or "").strip().upper() or None,
    }
    source = {k: v for k, v in source.items() if v not in (None, [])}
    try:
        found = _call(source, "pool_candidates")
    except PoolError:
        raise
    except DigitsError as exc:
        raise PoolError(f"No pool made from {_where(source)}: {exc}") from None
    candidates = list(found.get("candidates") or [])
    if not candidates:
        skipped = list(found.get("skipped") or [])
        detail = f" ({'; '.join(skipped[:3])})" if skipped else ""
        raise PoolError(f"No unlabelled image on {_where(source)} matches the pool's filters{detail}; nothing stored.")
    listing: dict[str, Any] = {"skipped": list(found.get("skipped") or [])[:MAX_LISTED]}
    if found.get("seg_reads") is not None:
        listing["seg_reads"] = int(found["seg_reads"])
    return create_pool(
        name,
        source,
        candidates,
        dimensions=int(found.get("dimensions") or 2),
        modality=found.get("modality") or source.get("modality"),
        class_labels=class_labels,
        listing=listing,
        jobs_dir=jobs_dir,
    )


def read_image(source: dict[str, Any], cand: dict[str, Any]) -> np.ndarray:
    """A DICOMweb pool candidate's image (``H×W×C``) read through its plugin (WADO-RS).

    Raises:
        DigitsError: The server or instance cannot be read, or it is not an image (named by the plugin).
    """
    return np.asarray(_call(source, "pool_image", cand.get("source") or {}))


def read_label(source: dict[str, Any], cand: dict[str, Any], entry: dict[str, Any]) -> np.ndarray:
    """The ``H×W`` uint8 class map a label version (or proposal) SEG on the pool's server holds for the candidate.

    Read through the plugin's ``review_label`` (the review page's reader), so a round trains on what the
    reviewer saved.

    Raises:
        PoolError: The plugin cannot read label SEGs back (named).
        DigitsError: The SEG cannot be fetched or has no frame for the candidate's image (named by the plugin).
    """
    plugin = source_plugin(source)
    if not callable(getattr(plugin, "review_label", None)):
        raise PoolError(f"The data plugin {plugin.__name__} cannot read label SEGs back from {_where(source)}.")
    return np.asarray(plugin.review_label(source, cand.get("source") or {}, entry), np.uint8)


def write_training_pair(
    source: dict[str, Any], cand: dict[str, Any], entry: dict[str, Any], image_path: Any, label_path: Any, channels: int
) -> None:
    """Write a candidate's image and its label SEG ``entry`` as 8-bit PNGs (the ``image-segmentation`` layout).

    The image gets ``channels`` channels and is cast to 8 bits as scoring casts it for a model
    (:func:`digits_core.resize.cast_to`: rounded, clipped to 0..255), so a retrained model sees the values the
    scoring saw; the label is the class map at the image's own size.

    Raises:
        PoolError: The label is not the image's size (named).
        DigitsError: The image or the SEG cannot be read (named by the plugin).
    """
    from PIL import Image

    from ..resize import cast_to, convert_channels

    image = cast_to(convert_channels(read_image(source, cand), channels), np.uint8)
    label = read_label(source, cand, entry)
    if label.shape != image.shape[:2]:
        raise PoolError(f"Candidate {cand['id']}: its label SEG is {label.shape}, the image {image.shape[:2]}.")
    Image.fromarray(image[:, :, 0] if channels == 1 else image).save(image_path)
    Image.fromarray(label).save(label_path)


def store_proposal(
    source: dict[str, Any], cand: dict[str, Any], mask: np.ndarray, class_labels: list[str], *, model_id: str
) -> dict[str, Any]:
    """Store a proposal of a DICOMweb pool candidate as a DICOM-SEG (STOW-RS); returns where (``study/series/sop``)."""
    where = _call(source, "pool_store_proposal", cand.get("source") or {}, mask, class_labels, model_id=model_id)
    return dict(where)


__all__ = [
    "DEFAULT_PLUGIN",
    "create_dicomweb_pool",
    "is_plugin_source",
    "read_image",
    "read_label",
    "store_proposal",
    "write_training_pair",
]
