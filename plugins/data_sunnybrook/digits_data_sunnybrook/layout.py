"""The Sunnybrook Cardiac Data folder layout: names, the case->series table, series detection.

Shared by the ingestion and the synthetic generator, so both agree on every name::

    challenge_training/SC-HF-I-1/IM-0004-0021.dcm                     images (case unpadded)
    Sunnybrook Cardiac MR Database ContoursPart3/TrainingDataContours/
        SC-HF-I-01/contours-manual/IRCCI-expert/IM-0001-0021-icontour-manual.txt

* Case folders of images are unpadded (``SC-HF-I-1``); contour case folders
  zero-pad the trailing number to two digits (``SC-HF-I-01``).
* ``IM-0001`` in a contour file name is a constant; the image series
  ``SSSS`` comes from the case->series table (:func:`load_series_table`).
* Image number ``NNNN`` = ``slice * 20 + phase + 1`` (20 cine phases per slice).
* Contour kinds: ``i`` (endocardium), ``o`` (epicardium), ``p1``/``p2`` (papillary).

All paths are :class:`pathlib.Path`, so any OS separator works.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from digits_core.errors import DigitsError

PHASES_PER_SLICE = 20
CONTOUR_SUBDIR = ("contours-manual", "IRCCI-expert")
CONTOUR_KINDS = ("i", "o", "p1", "p2")

#: A case id, padded or not: ``SC-HF-I-1``, ``SC-HF-NI-34``, ``SC-HYP-01``, ``SC-N-2``.
CASE_RE = re.compile(r"^(SC-[A-Z]+(?:-[A-Z]+)*)-(\d+)$")
IMAGE_RE = re.compile(r"^IM-(\d{4})-(\d{4})\.dcm$", re.IGNORECASE)
CONTOUR_RE = re.compile(r"^IM-0001-(\d{4})-(i|o|p1|p2)contour-manual\.txt$")


class LayoutError(DigitsError):
    """A folder does not have the Sunnybrook layout, or a case's series cannot be found."""


def pad_case(case: str) -> str:
    """``SC-HF-I-1`` -> ``SC-HF-I-01`` (contour folder name)."""
    match = CASE_RE.match(case)
    if not match:
        raise ValueError(f"not a Sunnybrook case id: {case!r}")
    return f"{match.group(1)}-{int(match.group(2)):02d}"


def unpad_case(case: str) -> str:
    """``SC-HF-I-01`` -> ``SC-HF-I-1`` (image folder name)."""
    match = CASE_RE.match(case)
    if not match:
        raise ValueError(f"not a Sunnybrook case id: {case!r}")
    return f"{match.group(1)}-{int(match.group(2))}"


def image_number(slice_index: int, phase: int) -> int:
    """Image number of a slice and cine phase (both from 0): ``slice * 20 + phase + 1``."""
    return slice_index * PHASES_PER_SLICE + phase + 1


def image_filename(series: str | int, number: int) -> str:
    """``IM-<SSSS>-<NNNN>.dcm``."""
    return f"IM-{int(series):04d}-{int(number):04d}.dcm"


def contour_filename(number: int, kind: str = "i") -> str:
    """``IM-0001-<NNNN>-<kind>contour-manual.txt``."""
    if kind not in CONTOUR_KINDS:
        raise ValueError(f"contour kind must be one of {CONTOUR_KINDS}, not {kind!r}")
    return f"IM-0001-{int(number):04d}-{kind}contour-manual.txt"


def load_series_table() -> dict[str, str]:
    """Return the shipped case -> series table (unpadded case ids, 4-digit series strings)."""
    from importlib import resources

    text = resources.files("digits_data_sunnybrook").joinpath("data/series.json").read_text(encoding="utf-8")
    data = json.loads(text)
    table: dict[str, str] = {}
    for part, cases in data.items():
        if part.startswith("_"):
            continue
        table.update({unpad_case(case): f"{int(series):04d}" for case, series in cases.items()})
    return table


def parse_series_override(text: str | None) -> dict[str, str]:
    """Parse ``"SC-HF-I-1=0004, SC-N-2:0898"`` (also newlines or ``;``) into ``{case: series}``.

    Raises:
        ValueError: An item is not ``CASE=SSSS``.
    """
    table: dict[str, str] = {}
    for item in re.split(r"[,;\n]+", text or ""):
        item = item.strip()
        if not item:
            continue
        match = re.match(r"^(\S+)\s*[=:]\s*(\d{1,4})$", item)
        if not match or not CASE_RE.match(match.group(1)):
            raise ValueError(f"expected CASE=SERIES (e.g. SC-HF-I-1=0004), found {item!r}")
        table[unpad_case(match.group(1))] = f"{int(match.group(2)):04d}"
    return table


def _is_contour_case(folder: Path) -> bool:
    return CASE_RE.match(folder.name) is not None and folder.joinpath(*CONTOUR_SUBDIR).is_dir()


def find_contour_cases(contour_folder: str | Path, max_depth: int = 3) -> dict[str, Path]:
    """Find contour case folders under ``contour_folder``.

    Accepts ``Sunnybrook Cardiac MR Database ContoursPart3``, its
    ``TrainingDataContours``, or any folder with padded case folders up to
    ``max_depth`` levels below that hold ``contours-manual/IRCCI-expert``.

    Returns:
        Unpadded case id -> its ``IRCCI-expert`` folder, sorted by case.
    """
    root = Path(contour_folder)
    found: dict[str, Path] = {}
    level = [root]
    for _ in range(max_depth + 1):
        next_level = []
        for folder in level:
            if _is_contour_case(folder):
                found.setdefault(unpad_case(folder.name), folder.joinpath(*CONTOUR_SUBDIR))
                continue
            try:
                next_level.extend(sorted(p for p in folder.iterdir() if p.is_dir()))
            except OSError:
                continue
        level = next_level
    return dict(sorted(found.items()))


def list_contours(expert_folder: Path, kind: str = "i") -> dict[int, Path]:
    """Image number -> contour file of the given kind in an ``IRCCI-expert`` folder."""
    out = {}
    for path in sorted(expert_folder.iterdir()):
        match = CONTOUR_RE.match(path.name)
        if match and match.group(2) == kind and path.is_file():
            out[int(match.group(1))] = path
    return out


def find_image_case_folder(image_folder: Path, case: str) -> Path | None:
    """The image folder of a case (unpadded name; a padded one is accepted too)."""
    for name in (unpad_case(case), pad_case(case)):
        candidate = image_folder / name
        if candidate.is_dir():
            return candidate
    return None


def detect_series(case_folder: Path, numbers: list[int]) -> str:
    """Find the image series the contours of one case were drawn on.

    Candidates are the series ``SSSS`` with a file ``IM-SSSS-NNNN.dcm`` for
    *every* contoured image number. A candidate qualifies when those files
    are readable DICOM headers sharing one ``SeriesInstanceUID`` and one
    orientation. Among qualifying series the one with the most files wins
    (the short-axis cine stack); a tie is an error asking for an override.

    Args:
        case_folder: The case's image folder.
        numbers: The contoured image numbers.

    Returns:
        The 4-digit series string.

    Raises:
        LayoutError: No series or more than one equally good series.
    """
    from .dicom import DicomReadError, read_dicom_header, series_key

    files_by_series: dict[str, dict[int, Path]] = defaultdict(dict)
    for path in case_folder.iterdir():
        match = IMAGE_RE.match(path.name)
        if match:
            files_by_series[match.group(1)][int(match.group(2))] = path
    wanted = sorted(set(numbers))
    candidates = [s for s, files in files_by_series.items() if all(n in files for n in wanted)]
    qualified = []
    reasons = []
    for series in sorted(candidates):
        keys = set()
        try:
            for n in wanted:
                keys.add(series_key(read_dicom_header(files_by_series[series][n])))
        except DicomReadError as exc:
            reasons.append(f"series {series}: {exc.reason}")
            continue
        if len(keys) == 1:
            qualified.append(series)
        else:
            reasons.append(f"series {series}: files belong to {len(keys)} different series/orientations")
    if not qualified:
        detail = f" ({'; '.join(reasons)})" if reasons else ""
        raise LayoutError(
            f"{case_folder}: no image series has files for all {len(wanted)} contoured image numbers "
            f"{wanted[:5]}{'...' if len(wanted) > 5 else ''}{detail}; give the case's series with the series override "
            f"(e.g. {case_folder.name}=0004)"
        )
    best = max(len(files_by_series[s]) for s in qualified)
    top = [s for s in qualified if len(files_by_series[s]) == best]
    if len(top) > 1:
        raise LayoutError(
            f"{case_folder}: series {', '.join(top)} all match the contoured images; "
            f"give the right one with the series override (e.g. {case_folder.name}={top[0]})"
        )
    return top[0]
