"""A DICOMweb source other plugins can reuse: QIDO-RS search, WADO-RS retrieval with a local cache, STOW-RS store.

>>> source = DicomWebSource("http://127.0.0.1:8042/dicom-web", username="digits", password="...")
>>> refs = source.find_instances(StudyQuery(modality="MR", patient_ids=("SC-HF-I-1",)))
>>> failures = source.fetch_all(refs)          # bounded parallel WADO-RS, cached by SOP Instance UID
>>> ds = source.retrieve(refs[0])              # from the cache now

Retrieved instances are cached as ``<cache>/<SOPInstanceUID>.dcm`` (written
to a temporary name, then renamed: a killed fetch never leaves half a file),
so a second build, or a build resumed after a failure, reads from disk and
asks the server only for what is missing.

Credentials (basic auth or a bearer token) live only in memory: ``repr()``
and every message show the server URL without them. Errors are
:class:`DicomWebError`, whose message names the server, the instance and
what to do; the server's response body is never echoed.

A source built in a server context for a URL a web user typed is
*guarded* (:mod:`digits_core.outbound`): the URL is checked before any
request, every connection's address is checked, UIDs the server returns
must be DICOM UIDs, and patient IDs are replaced by a stable hash in
everything the source reports, so no text from a hostile server reaches a
message.

Importing this module imports neither pydicom nor dicomweb-client.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from digits_core import DigitsError
from digits_core.outbound import OutboundURLError, check_url, guard_session, in_server_context

#: Environment variable naming the cache root (default ``~/.cache/digits/dicomweb``).
CACHE_ENV = "DIGITS_DICOMWEB_CACHE"
_UID = re.compile(r"^[0-9]+(\.[0-9]+)*$")


def is_uid(value) -> bool:
    """True for a DICOM UID (digits and dots, at most 64 characters): safe in a file name and a message."""
    return isinstance(value, str) and len(value) <= 64 and bool(_UID.match(value))


#: HTTP answers that mean "busy, ask again" (too many requests, request timeout, unavailable, gateway timeout).
BUSY_STATUSES = (429, 408, 503, 504)


def busy_retries():
    """The source's retry policy: a busy answer (:data:`BUSY_STATUSES`) is asked again twice (at once, then
    after 1 s); a connection that fails, times out or is refused is not retried, so its error comes at once.

    Returns:
        A ``urllib3.util.retry.Retry`` for ``requests.adapters.HTTPAdapter(max_retries=...)``.
    """
    from urllib3.util.retry import Retry

    return Retry(
        total=2,
        connect=0,
        read=0,
        other=0,
        status=2,
        status_forcelist=BUSY_STATUSES,
        allowed_methods=None,  # any verb: QIDO/WADO GETs and STOW POSTs alike
        backoff_factor=0.5,
        raise_on_status=False,  # the last busy answer goes back to the caller, who names its status
        respect_retry_after_header=False,  # "briefly": a Retry-After of minutes would hang the job
    )


class DicomWebError(DigitsError):
    """A DICOMweb request failed; the message names the server and the object, never the credentials."""


def public_url(url: str) -> str:
    """The URL without any ``user:password@`` part, for messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


@dataclass(frozen=True)
class StudyQuery:
    """Which studies to take from the server (QIDO-RS study-level search; empty fields match everything).

    Attributes:
        modality: Modality the study must contain (``ModalitiesInStudy``, e.g. ``MR``).
        study_description: Study Description (DICOM wildcards ``*`` and ``?`` allowed).
        series_description: Series Description the image series must have (wildcards allowed).
        date_from: First study date, ``YYYYMMDD``.
        date_to: Last study date, ``YYYYMMDD``.
        patient_ids: Only these patients.
        study_uids: Only these studies (StudyInstanceUID).
    """

    modality: str = ""
    study_description: str = ""
    series_description: str = ""
    date_from: str = ""
    date_to: str = ""
    patient_ids: tuple[str, ...] = ()
    study_uids: tuple[str, ...] = ()

    def study_filters(self) -> list[dict[str, str]]:
        """QIDO-RS search filters, one per patient id and study UID combination."""
        base: dict[str, str] = {}
        if self.modality:
            base["ModalitiesInStudy"] = self.modality
        if self.study_description:
            base["StudyDescription"] = self.study_description
        if self.date_from or self.date_to:
            base["StudyDate"] = f"{self.date_from}-{self.date_to}"
        filters = [dict(base)]
        if self.patient_ids:
            filters = [{**f, "PatientID": p} for f in filters for p in self.patient_ids]
        if self.study_uids:
            filters = [{**f, "StudyInstanceUID": u} for f in filters for u in self.study_uids]
        return filters


@dataclass(frozen=True, order=True)
class InstanceRef:
    """One instance on the server (picklable; ``str()`` names it for the errors report).

    Attributes:
        patient: Patient ID.
        study: StudyInstanceUID.
        series: SeriesInstanceUID.
        sop: SOPInstanceUID.
        modality: The series' modality (``SEG`` for segmentations).
        number: InstanceNumber (0 when the server did not say).
        series_description: The series' description.
    """

    patient: str
    study: str
    series: str
    sop: str
    modality: str = ""
    number: int = 0
    series_description: str = ""

    def __str__(self) -> str:
        where = f"patient {self.patient}, series {self.series}" if self.patient else f"series {self.series}"
        return f"instance {self.sop} ({where})"


def _number(value) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _first(item: dict, tag: str, default=""):
    """The first value of a DICOM JSON attribute (``{"0020000D": {"vr": "UI", "Value": [...]}}``)."""
    values = (item.get(tag) or {}).get("Value") or []
    if not values:
        return default
    value = values[0]
    if isinstance(value, dict):  # person names
        return value.get("Alphabetic", default)
    return value


_STUDY_UID, _SERIES_UID, _SOP_UID = "0020000D", "0020000E", "00080018"
_PATIENT_ID, _MODALITY, _INSTANCE_NUMBER, _SERIES_DESCRIPTION = "00100020", "00080060", "00200013", "0008103E"


class DicomWebSource:
    """A DICOMweb server (QIDO-RS, WADO-RS, STOW-RS) with a local instance cache.

    Args:
        url: The DICOMweb root (e.g. ``http://127.0.0.1:8042/dicom-web``).
        username: User for HTTP basic authentication (empty: none).
        password: Its password (kept in memory only).
        token: Bearer token (instead of basic authentication).
        cache_dir: Cache folder (default: ``$DIGITS_DICOMWEB_CACHE`` or
            ``~/.cache/digits/dicomweb``, then one folder per server URL).
        max_parallel: Most WADO-RS requests in flight at once.
        timeout: Seconds per request.
        guarded: Treat the URL as typed by a web user (see the module docstring);
            default: whenever a server context is active.

    Raises:
        DicomWebError: Not an http(s) URL, or (guarded) one the operator did not allow.
    """

    def __init__(
        self,
        url: str,
        *,
        username: str = "",
        password: str = "",
        token: str = "",
        cache_dir: str | os.PathLike | None = None,
        max_parallel: int = 4,
        timeout: float = 30.0,
        guarded: bool | None = None,
    ):
        url = str(url or "").strip().rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise DicomWebError(
                f"server_url: {public_url(url) or 'nothing'} is not an http(s) URL of a DICOMweb root "
                "(e.g. http://127.0.0.1:8042/dicom-web)"
            )
        self.guarded = in_server_context() if guarded is None else bool(guarded)
        if self.guarded:
            try:
                check_url(url, "server_url")
            except OutboundURLError as exc:
                raise DicomWebError(str(exc)) from None
        self.url = url
        self._auth = (username, password) if username else None
        self._token = token or ""
        root = Path(
            cache_dir or os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "digits" / "dicomweb"
        ).expanduser()
        self.cache_dir = root / hashlib.sha1(public_url(url).encode()).hexdigest()[:12]
        self.max_parallel = max(1, int(max_parallel))
        self.timeout = float(timeout)
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"DicomWebSource({public_url(self.url)!r}, cache_dir={str(self.cache_dir)!r})"

    def __getstate__(self):  # picklable for worker processes: the thread-local client is rebuilt there
        state = dict(self.__dict__)
        state.pop("_local", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._local = threading.local()

    # -- plumbing ------------------------------------------------------------------

    @property
    def client(self):
        """A ``dicomweb_client.DICOMwebClient`` for this thread (sessions are not shared between threads)."""
        client = getattr(self._local, "client", None)
        if client is None:
            import requests
            from dicomweb_client.api import DICOMwebClient
            from requests.adapters import HTTPAdapter

            session = requests.Session()
            if self.guarded:
                guard_session(session, max_retries=busy_retries())
            else:
                adapter = HTTPAdapter(max_retries=busy_retries())
                session.mount("http://", adapter)
                session.mount("https://", adapter)
            if self._auth:
                session.auth = self._auth
            if self._token:
                session.headers["Authorization"] = f"Bearer {self._token}"
            client = DICOMwebClient(self.url, session=session, timeout=self.timeout)
            # dicomweb-client's own retry repeats *every* failed request (a refused connection, a refused
            # address) three times with back-off; the session's adapter retries only busy answers.
            client.set_http_retry_params(retry=False)
            self._local.client = client
        return client

    def _explain(self, exc: BaseException, action: str) -> DicomWebError:
        import requests

        where = public_url(self.url)
        if isinstance(exc, requests.exceptions.HTTPError) and exc.response is not None:
            status = exc.response.status_code
            if status in (401, 403):
                return DicomWebError(
                    f"The DICOMweb server {where} refused the credentials (HTTP {status}) to {action}: "
                    "check the username and password, or the token."
                )
            if status == 404:
                return DicomWebError(f"The DICOMweb server {where} has no such object ({action}: HTTP 404).")
            return DicomWebError(f"The DICOMweb server {where} answered HTTP {status} to {action}.")
        if isinstance(exc, requests.exceptions.ConnectionError):
            return DicomWebError(
                f"Cannot reach the DICOMweb server {where} to {action}: is it running, and is the "
                "URL right (e.g. http://127.0.0.1:8042/dicom-web)?"
            )
        if isinstance(exc, requests.exceptions.Timeout):
            return DicomWebError(f"The DICOMweb server {where} did not answer within {self.timeout:g} s to {action}.")
        return DicomWebError(f"DICOMweb request to {where} failed to {action} ({type(exc).__name__}).")

    def _call(self, action: str, func: Callable, *args, **kwargs):
        import requests

        try:
            return func(*args, **kwargs)
        except OutboundURLError as exc:
            raise DicomWebError(f"{exc} ({action})") from None
        except (requests.exceptions.RequestException, OSError, ValueError) as exc:
            raise self._explain(exc, action) from None

    def _patient(self, value) -> str:
        """A patient ID as reported: the server's own text, or (guarded) a stable hash of it."""
        text = str(value)
        if not self.guarded:
            return text
        return "patient-" + hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()[:10]

    def _uids_ok(self, *values) -> bool:
        """Whether UIDs from an answer may be used (always, unless guarded)."""
        return not self.guarded or all(is_uid(v) for v in values)

    # -- QIDO-RS -------------------------------------------------------------------

    def find_studies(self, query: StudyQuery) -> list[dict]:
        """Search studies (QIDO-RS); return their DICOM JSON, de-duplicated by StudyInstanceUID."""
        studies: dict[str, dict] = {}
        for search_filters in query.study_filters():
            found = self._call(
                "search studies",
                self.client.search_for_studies,
                search_filters=search_filters,
                fields=["PatientID", "StudyDescription", "StudyDate"],
            )
            for item in found:
                if self._uids_ok(_first(item, _STUDY_UID)):
                    studies.setdefault(_first(item, _STUDY_UID), item)
        return [studies[uid] for uid in sorted(studies)]

    def find_series(self, query: StudyQuery) -> list[InstanceRef]:
        """The series of the matching studies (one search per study, ``max_parallel`` at a time).

        Returns:
            One :class:`InstanceRef` per series, with an empty ``sop``. Image series whose description does
            not match ``query.series_description`` are left out; SEG series are always kept.
        """
        import fnmatch

        def one(study: dict) -> list[InstanceRef]:
            study_uid, patient = _first(study, _STUDY_UID), self._patient(_first(study, _PATIENT_ID))
            found = self._call(
                f"list the series of study {study_uid}",
                self.client.search_for_series,
                study_instance_uid=study_uid,
                fields=["Modality", "SeriesDescription"],
            )
            refs = []
            for item in found:
                modality, description = str(_first(item, _MODALITY)), str(_first(item, _SERIES_DESCRIPTION))
                if not self._uids_ok(_first(item, _SERIES_UID)):
                    continue
                if (
                    modality != "SEG"
                    and query.series_description
                    and not fnmatch.fnmatchcase(description.lower(), query.series_description.lower())
                ):
                    continue
                refs.append(InstanceRef(patient, study_uid, _first(item, _SERIES_UID), "", modality, 0, description))
            return refs

        with ThreadPoolExecutor(max_workers=self.max_parallel, thread_name_prefix="qido") as pool:
            return sorted(ref for refs in pool.map(one, self.find_studies(query)) for ref in refs)

    def series_instances(self, series: InstanceRef) -> list[InstanceRef]:
        """The instances of one series (a :meth:`find_series` result), sorted (QIDO-RS instance search)."""
        found = self._call(
            f"list the instances of series {series.series}",
            self.client.search_for_instances,
            study_instance_uid=series.study,
            series_instance_uid=series.series,
            fields=["InstanceNumber"],
        )
        return sorted(
            InstanceRef(
                series.patient,
                series.study,
                series.series,
                _first(item, _SOP_UID),
                series.modality,
                _number(_first(item, _INSTANCE_NUMBER, 0)),
                series.series_description,
            )
            for item in found
            if self._uids_ok(_first(item, _SOP_UID))
        )

    def locate_series(self, series_uid: str, study_uid: str = "") -> InstanceRef:
        """The series ``series_uid`` (its study found by a QIDO-RS search when ``study_uid`` is empty).

        Raises:
            DicomWebError: The server has no such series.
        """
        filters = {"SeriesInstanceUID": series_uid, **({"StudyInstanceUID": study_uid} if study_uid else {})}
        found = self._call(
            f"find series {series_uid}",
            self.client.search_for_series,
            search_filters=filters,
            fields=["PatientID", "Modality", "SeriesDescription"],
        )
        found = [item for item in found if self._uids_ok(_first(item, _STUDY_UID))]
        if not found:
            raise DicomWebError(f"The DICOMweb server {public_url(self.url)} has no series {series_uid}.")
        item = found[0]
        return InstanceRef(
            self._patient(_first(item, _PATIENT_ID)),
            str(_first(item, _STUDY_UID)),
            series_uid,
            "",
            str(_first(item, _MODALITY)),
            0,
            str(_first(item, _SERIES_DESCRIPTION)),
        )

    def find_instances(self, query: StudyQuery, *, modality: str | None = None) -> list[InstanceRef]:
        """Every instance of the series :meth:`find_series` finds (only series of ``modality`` when given)."""
        series_list = [s for s in self.find_series(query) if modality is None or s.modality == modality]
        with ThreadPoolExecutor(max_workers=self.max_parallel, thread_name_prefix="qido") as pool:
            return sorted(ref for refs in pool.map(self.series_instances, series_list) for ref in refs)

    # -- WADO-RS with a cache -------------------------------------------------------

    def cache_path(self, sop: str) -> Path:
        """Where the instance ``sop`` is (or will be) cached.

        Raises:
            DicomWebError: ``sop`` is not a DICOM UID (a hostile server's ``../../x``).
        """
        if not is_uid(sop):
            raise DicomWebError(
                f"The DICOMweb server {public_url(self.url)} gave an instance whose SOPInstanceUID "
                "is not a DICOM UID (digits and dots); it is skipped."
            )
        return self.cache_dir / f"{sop}.dcm"

    def is_cached(self, ref: InstanceRef) -> bool:
        """Whether ``ref`` is in the cache already."""
        return is_uid(ref.sop) and self.cache_path(ref.sop).is_file()

    def fetch(self, ref: InstanceRef) -> Path:
        """Make sure ``ref`` is in the cache (WADO-RS on a miss); return its cached file.

        Raises:
            DicomWebError: The server refused or failed (the message names the instance).
        """
        path = self.cache_path(ref.sop)
        if path.is_file():
            return path
        dataset = self._call(f"retrieve {ref}", self.client.retrieve_instance, ref.study, ref.series, ref.sop)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.part")
        try:
            dataset.save_as(partial, enforce_file_format=True)
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)
        return path

    def retrieve(self, ref: InstanceRef):
        """Return the instance as a ``pydicom.Dataset`` (from the cache, fetching it first on a miss)."""
        import pydicom

        path = self.fetch(ref)
        try:
            return pydicom.dcmread(path)
        except Exception as exc:  # noqa: BLE001 - a damaged cache file: drop it so the next build fetches it again
            path.unlink(missing_ok=True)
            raise DicomWebError(
                f"The cached copy of {ref} was unreadable ({type(exc).__name__}) and was removed; "
                "run the job again to fetch it anew."
            ) from None

    def fetch_all(
        self, refs: Iterable[InstanceRef], *, progress: Callable[[int, int], None] | None = None
    ) -> dict[str, str]:
        """Fetch every uncached instance, at most ``max_parallel`` requests at a time.

        Returns:
            SOP Instance UID -> error message, for the instances that failed (the others are cached).
        """
        missing = [ref for ref in refs if not self.is_cached(ref)]
        failures: dict[str, str] = {}
        if not missing:
            return failures

        def one(ref: InstanceRef):
            try:
                self.fetch(ref)
            except DicomWebError as exc:
                failures[ref.sop] = str(exc)

        with ThreadPoolExecutor(max_workers=self.max_parallel, thread_name_prefix="dicomweb") as pool:
            for done, _ in enumerate(pool.map(one, missing), start=1):
                if progress:
                    progress(done, len(missing))
        return failures

    # -- STOW-RS --------------------------------------------------------------------

    def store(self, datasets: Sequence) -> None:
        """Store instances on the server (STOW-RS).

        Raises:
            DicomWebError: The server refused them.
        """
        self._call(f"store {len(datasets)} instance(s)", self.client.store_instances, datasets=list(datasets))


__all__ = ["DicomWebSource", "DicomWebError", "StudyQuery", "InstanceRef", "is_uid", "public_url", "CACHE_ENV"]
