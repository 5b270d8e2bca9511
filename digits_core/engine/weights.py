"""Where a backbone network's starting weights come from: offline first, every file checked.

The ``weights`` training option takes

* ``none``: random initial weights;
* a name the network declares (``imagenet``): the network's :class:`~digits_core.engine.networks.NetworkSpec`
  ``weights`` table gives the file's name, its hash (Keras's own: MD5 or SHA-256 by length) and its origin URL;
* ``zoo:NAME``: an entry of the model zoo (:mod:`digits_core.engine.zoo`), checked against its SHA-256;
* a weights file (``.h5`` as Keras applications ship them, or ``.weights.h5``); on the server it must lie
  under the data roots, like every path a user types.

A declared name is looked up, in order, in the zoo folder (``$DIGITS_ZOO``, default ``~/.digits/zoo``), then in
Keras's own cache (``$KERAS_HOME/models``, default ``~/.keras/models``) under the file name Keras uses, so a
file a user copied there works; only then is it downloaded from its origin, unless ``$DIGITS_OFFLINE`` is set,
and on the server only where the operator's outbound rules allow the host (:mod:`digits_core.outbound`).
A downloaded file is checked against its hash before it is moved into Keras's cache. Without a file and a
connection, :class:`WeightsError` names the file, its hash and the folders to put it in; a file whose hash
differs is refused, naming it. Resolution runs before a job folder exists (no TensorFlow here).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import FormValidationError
from ..outbound import OutboundURLError, check_url
from ..paths import check_server_path

#: Environment variable: the model zoo folder (default ``~/.digits/zoo``).
ZOO_ENV = "DIGITS_ZOO"
#: The zoo's index of entries, in the zoo folder.
MANIFEST = "manifest.json"
#: Environment variable: when set (to anything but ``0``), nothing is downloaded.
OFFLINE_ENV = "DIGITS_OFFLINE"
#: Seconds a download may wait for the origin to answer.
DOWNLOAD_TIMEOUT = 10.0
_FORM = "training options"
_CHUNK = 1 << 20


class WeightsError(FormValidationError):
    """The ``weights`` option names weights that cannot be used (missing, tampered, unknown, not allowed)."""

    def __init__(self, message: str):
        super().__init__({"weights": [message]}, _FORM)


@dataclass(frozen=True)
class ResolvedWeights:
    """A weights file ready to load, and where it came from (recorded in ``model.json``).

    Attributes:
        name: What the user asked for (``imagenet``, ``zoo:NAME`` or the file as given).
        path: The local file.
        sha256: The file's SHA-256.
        source: Its origin URL, the zoo entry's source, or ``file``.
        license: The weights' license where known.
        channels: Input channels the weights were trained with (``None``: unknown).
    """

    name: str
    path: str
    sha256: str
    source: str
    license: str = ""
    channels: int | None = None

    def record(self) -> dict:
        """The JSON record (``model.json`` ``weights``)."""
        return asdict(self)


def is_none(value: object) -> bool:
    """True for the values that mean random initial weights."""
    return value is None or str(value).strip().lower() in ("", "none")


def offline() -> bool:
    """True when ``$DIGITS_OFFLINE`` forbids downloads."""
    return os.environ.get(OFFLINE_ENV, "").strip() not in ("", "0")


def zoo_dir() -> Path:
    """The model zoo folder (``$DIGITS_ZOO``, default ``~/.digits/zoo``)."""
    return Path(os.environ.get(ZOO_ENV) or "~/.digits/zoo").expanduser()


def read_manifest(folder: Path | None = None) -> dict:
    """The zoo's entries by name (``{}`` without a manifest).

    Raises:
        WeightsError: A manifest that is not a JSON object of entries (named, with what to do).
    """
    path = (folder or zoo_dir()) / MANIFEST
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise WeightsError(
            f"the zoo manifest {path} cannot be read ({type(exc).__name__}); fix or remove it."
        ) from None
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise WeightsError(f'the zoo manifest {path} has no "entries" object; fix or remove it.')
    return {str(k): v for k, v in entries.items() if isinstance(v, dict)}


def resolve_zoo_entry(name: str, network: str) -> ResolvedWeights:
    """The zoo entry ``name``, checked against its SHA-256 and the network it fits.

    Raises:
        WeightsError: No such entry, a missing or tampered file, or weights for another network.
    """
    folder = zoo_dir()
    entries = read_manifest(folder)
    entry = entries.get(name)
    if entry is None:
        known = ", ".join(sorted(entries)) or "none"
        raise WeightsError(f"zoo:{name}: no such entry in {folder / MANIFEST} (entries: {known}; see digits zoo list).")
    fits = str(entry.get("network") or "")
    if fits and fits.lower() != network.lower():
        raise WeightsError(
            f'zoo:{name} holds weights of network "{fits}", not "{network}": train with --network {fits}.'
        )
    path = folder / str(entry.get("file") or "")
    if not path.is_file():
        raise WeightsError(f"zoo:{name}: its file {path} is missing (sha256 {entry.get('sha256')}); put it back.")
    check_hash(path, str(entry.get("sha256") or ""), f"zoo:{name}")
    channels = entry.get("input_channels")
    return ResolvedWeights(
        f"zoo:{name}",
        str(path),
        str(entry["sha256"]),
        str(entry.get("source") or "zoo"),
        str(entry.get("license") or ""),
        int(channels) if isinstance(channels, int) else None,
    )


def keras_cache_dir() -> Path:
    """Keras's download cache for application weights (``$KERAS_HOME/models``)."""
    return Path(os.environ.get("KERAS_HOME") or "~/.keras").expanduser() / "models"


def file_digest(path: str | os.PathLike, algorithm: str = "sha256") -> str:
    """The hex digest of a file (``sha256`` or ``md5``), read in chunks."""
    digest = hashlib.new(algorithm, usedforsecurity=False) if algorithm == "md5" else hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def hash_algorithm(expected: str) -> str:
    """Keras's rule: a 64-digit hash is SHA-256, a shorter one MD5."""
    return "sha256" if len(expected) == 64 else "md5"


def check_hash(path: Path, expected: str, what: str) -> None:
    """Refuse ``path`` when its digest is not ``expected``.

    Raises:
        WeightsError: Naming the file, both hashes and what to do.
    """
    algorithm = hash_algorithm(expected)
    actual = file_digest(path, algorithm)
    if actual.lower() != expected.lower():
        raise WeightsError(
            f"{what}: the file {path} has {algorithm} {actual}, expected {expected}: it is damaged or not the "
            "published file; delete it and put the right file there."
        )


def resolve_weights(
    value: str | None, network: str, declared: dict, *, download: bool = True
) -> ResolvedWeights | None:
    """Find the file that ``weights=value`` names for ``network`` (see the module docstring).

    Args:
        value: The option as given.
        network: The network's name (zoo entries say which network they fit).
        declared: The network's weights table (``NetworkSpec.weights``): name to ``{"file", "hash",
            "origin", "license"}``.
        download: Fetch a missing declared file now; False (a web request): only check that it may be
            fetched, and return it with an empty ``path`` and ``sha256`` (the job downloads it).

    Returns:
        The file, or ``None`` for random initial weights.

    Raises:
        WeightsError: Unknown name, missing or tampered file, a download refused or failed.
    """
    if is_none(value):
        return None
    text = str(value).strip()
    if not declared:
        raise WeightsError(
            f'network "{network}" takes no pretrained weights; leave weights empty (use pretrained= to fine-tune '
            "from a model job or a Keras file)."
        )
    if text.lower().startswith("zoo:"):
        return resolve_zoo_entry(text[4:].strip(), network)
    if text.lower() in {k.lower() for k in declared}:
        name = next(k for k in declared if k.lower() == text.lower())
        return _declared(name, dict(declared[name]), download)
    path = check_server_path(text, "weights", form_name=_FORM)
    if path.is_file():
        return ResolvedWeights(text, str(path.resolve()), file_digest(path), "file")
    raise WeightsError(
        f'"{text}" is not a weights file, nor one of none, {", ".join(declared)} or zoo:NAME for network '
        f'"{network}" (digits zoo list shows the zoo).'
    )


def _declared(name: str, entry: dict, download: bool) -> ResolvedWeights:
    file_name, expected = str(entry["file"]), str(entry["hash"])
    origin, license_ = str(entry.get("origin") or ""), str(entry.get("license") or "")
    folders = [zoo_dir(), keras_cache_dir()]
    for folder in folders:
        candidate = folder / file_name
        if candidate.is_file():
            check_hash(candidate, expected, f"weights {name}")
            return ResolvedWeights(name, str(candidate), file_digest(candidate), origin, license_, 3)
    algorithm = hash_algorithm(expected)
    missing = (
        f"weights {name}: {file_name} ({algorithm} {expected}) is not in {folders[0]} nor in {folders[1]}; "
        f"copy the file into either folder (it is published at {origin or 'its origin'})"
    )
    if offline() or not origin:
        raise WeightsError(missing + (f" (downloads are off: ${OFFLINE_ENV} is set)." if offline() else "."))
    try:
        check_url(origin, "weights")
    except OutboundURLError as exc:
        raise WeightsError(f"{missing}; this server may not download it: {exc}") from None
    if not download:
        return ResolvedWeights(name, "", "", origin, license_, 3)
    target = folders[1] / file_name
    _download(origin, target, expected, missing)
    return ResolvedWeights(name, str(target), file_digest(target), origin, license_, 3)


def _download(url: str, target: Path, expected: str, missing: str) -> None:
    """Fetch ``url`` into ``target`` through a temporary file, moved there only when its hash matches."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=".download-", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT) as answer:  # noqa: S310 - http(s) only
                    for chunk in iter(lambda: answer.read(_CHUNK), b""):
                        out.write(chunk)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                reason = getattr(exc, "reason", None) or exc
                raise WeightsError(f"{missing}; the download from {url} failed ({reason}).") from None
        check_hash(Path(tmp), expected, f"download from {url}")
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
