"""DICOM-SEG in and out: label maps from a Segmentation object, and a Segmentation from predicted masks.

A Segmentation (SEG) object holds one segment per class (segment numbers
``1..K``; ``0`` is background) and frames that reference the source images
they were drawn on (Referenced SOP Instance UID, and the frame number for
multi-frame sources). :class:`SegmentationLabels` turns such an object into
``H x W`` label maps per source instance; :func:`build_segmentation` writes
one from masks, with highdicom, for ground truth (``manual=True``) or for a
model's predictions (an ``AUTOMATIC`` segmentation naming DIGITS Core as the
algorithm).

Every frame is written, empty ones included (``omit_empty_frames=False``), so
that "this image has no left ventricle" is a label too and a round trip gives
back exactly the masks written.

Importing this module imports neither pydicom nor highdicom.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from digits_core import DigitsError
from digits_core.limits import dicom_pixels_problem

#: Coding scheme of the segment property types DIGITS writes (a private scheme: class names are free text).
CODING_SCHEME = "99DIGITS"


class SegmentationError(DigitsError):
    """A DICOM-SEG object cannot be read or written (the message names it)."""


class SegmentationLabels:
    """Label maps of the source images a DICOM-SEG object segments.

    Reads the standard Segmentation IOD layout with pydicom alone (segments from
    SegmentSequence; per frame, the segment from SegmentIdentificationSequence
    and the source image from DerivationImageSequence), which is much cheaper
    than building highdicom's frame index for every object.

    Args:
        dataset: The SEG object (a ``pydicom.Dataset``).
        name: How to name it in messages (e.g. its SOP Instance UID).

    Raises:
        SegmentationError: The object is not a Segmentation or its frames cannot be mapped.
    """

    def __init__(self, dataset, name: str = ""):
        try:  # pydicom parses elements lazily: a damaged header fails here, on first access
            self.name = name or str(dataset.get("SOPInstanceUID", "<segmentation>"))
            modality = str(dataset.get("Modality", ""))
        except Exception as exc:  # noqa: BLE001 - any parse error of a hostile file is "unreadable"
            raise SegmentationError(
                f"DICOM-SEG {name or '<segmentation>'}: unreadable header ({type(exc).__name__})"
            ) from None
        if modality != "SEG":
            raise SegmentationError(f"DICOM-SEG {self.name}: its Modality is not SEG")
        self._dataset = dataset
        self._pixels: np.ndarray | None = None
        try:
            segments = {int(item.SegmentNumber): str(item.SegmentLabel) for item in dataset.SegmentSequence}
            self.segment_numbers = sorted(segments)
            self.segment_labels = [segments[n] for n in self.segment_numbers]
            series_of = {
                str(inst.ReferencedSOPInstanceUID): str(series.SeriesInstanceUID)
                for series in dataset.get("ReferencedSeriesSequence", [])
                for inst in series.ReferencedInstanceSequence
            }
            self._frames: dict[str, list[tuple[int, int]]] = {}
            shared = (dataset.get("SharedFunctionalGroupsSequence") or [{}])[0]
            for index, frame in enumerate(dataset.PerFrameFunctionalGroupsSequence):
                # a functional group sits per frame, or once for all frames in the shared groups
                identification = frame.get("SegmentIdentificationSequence") or shared.get(
                    "SegmentIdentificationSequence"
                )
                segment = int(identification[0].ReferencedSegmentNumber)
                derivations = frame.get("DerivationImageSequence") or shared.get("DerivationImageSequence") or []
                for derivation in derivations:
                    for source in derivation.SourceImageSequence:
                        self._frames.setdefault(str(source.ReferencedSOPInstanceUID), []).append((index, segment))
            self.rows, self.columns = int(dataset.Rows), int(dataset.Columns)
        except (AttributeError, IndexError, KeyError, TypeError, ValueError, NotImplementedError, OverflowError) as exc:
            raise SegmentationError(f"DICOM-SEG {self.name} cannot be parsed ({type(exc).__name__}: {exc})") from exc
        study = str(getattr(dataset, "StudyInstanceUID", ""))
        #: ``(study, series, sop)`` UIDs of the source images, in the SEG's frame order.
        self.source_images = [(study, series_of.get(sop, ""), sop) for sop in self._frames]
        self.source_sop_uids = list(self._frames)
        fractional = str(getattr(dataset, "SegmentationType", "BINARY")) == "FRACTIONAL"
        self._threshold = int(getattr(dataset, "MaximumFractionalValue", 255)) / 2.0 if fractional else 0

    @property
    def class_labels(self) -> list[str]:
        """Class names with background first (index = label value)."""
        return ["background", *self.segment_labels]

    def _frame_pixels(self) -> np.ndarray:
        if self._pixels is None:
            too_big = dicom_pixels_problem(self._dataset)
            if too_big:  # refused before pydicom allocates from the header's numbers
                raise SegmentationError(f"DICOM-SEG {self.name}: {too_big}")
            try:
                pixels = np.asarray(self._dataset.pixel_array)
            except Exception as exc:  # noqa: BLE001 - pydicom raises builtins for bad pixel data
                raise SegmentationError(f"DICOM-SEG {self.name}: pixel data cannot be decoded ({exc})") from exc
            self._pixels = pixels.reshape(-1, self.rows, self.columns)
        return self._pixels

    def label_map(self, sop_instance_uid: str) -> np.ndarray:
        """Return the ``H x W`` uint8 label map (segment numbers, 0 background) of one source instance.

        Where segments overlap, the higher segment number wins.

        Raises:
            SegmentationError: The object does not reference that instance.
        """
        frames = self._frames.get(sop_instance_uid)
        if not frames:
            raise SegmentationError(f"DICOM-SEG {self.name} has no frame for source instance {sop_instance_uid}")
        pixels = self._frame_pixels()
        labels = np.zeros((self.rows, self.columns), np.uint8)
        for index, segment in sorted(frames, key=lambda item: item[1]):
            labels[pixels[index] > self._threshold] = segment
        return labels


def _segment_descriptions(class_labels: Sequence[str], manual: bool):
    import highdicom as hd
    from pydicom.sr.codedict import codes

    if manual:
        algorithm_type, algorithm = hd.seg.SegmentAlgorithmTypeValues.MANUAL, None
    else:
        from digits_core import __version__

        algorithm_type = hd.seg.SegmentAlgorithmTypeValues.AUTOMATIC
        algorithm = hd.AlgorithmIdentificationSequence(
            name="DIGITS Core", version=str(__version__), family=codes.cid7162.ArtificialIntelligence
        )
    descriptions = []
    for number, label in enumerate(class_labels[1:], start=1):
        descriptions.append(
            hd.seg.SegmentDescription(
                segment_number=number,
                segment_label=str(label)[:64],
                segmented_property_category=codes.SCT.Tissue,
                segmented_property_type=hd.sr.CodedConcept(
                    value=f"class-{number}", scheme_designator=CODING_SCHEME, meaning=str(label)[:64]
                ),
                algorithm_type=algorithm_type,
                algorithm_identification=algorithm,
            )
        )
    return descriptions


#: Patient/study attributes a SEG copies from its sources; DICOM lets them be empty (type 2) but they must be present.
_TYPE2_COPIED = (
    "PatientName",
    "PatientID",
    "PatientBirthDate",
    "PatientSex",
    "StudyDate",
    "StudyTime",
    "StudyID",
    "AccessionNumber",
    "ReferringPhysicianName",
)


def _header_for_seg(source):
    """A header-only copy of a source image with the type-2 attributes highdicom copies filled (empty) when absent."""
    from pydicom.dataset import Dataset

    header = Dataset()
    for element in source:
        if element.keyword != "PixelData":
            header.add(element)
    if hasattr(source, "file_meta"):
        header.file_meta = source.file_meta
    for keyword in _TYPE2_COPIED:
        if keyword not in header:
            setattr(header, keyword, "")
    return header


def _position_groups(source_images: Sequence) -> list[list[int]]:
    """Indices of the sources split so that no group holds two images at the same plane position.

    A SEG's frames are organised by plane position; a cine series has every
    phase of a slice at one position, so its images go into several SEGs.
    """
    groups: list[list[int]] = []
    seen: list[set] = []
    for index, source in enumerate(source_images):
        position = tuple(round(float(v), 4) for v in getattr(source, "ImagePositionPatient", ()) or ()) or (
            "index",
            index,
        )
        for group, positions in zip(groups, seen):
            if position not in positions:
                group.append(index)
                positions.add(position)
                break
        else:
            groups.append([index])
            seen.append({position})
    return groups


def build_segmentations(
    source_images: Sequence,
    masks: np.ndarray,
    class_labels: Sequence[str],
    *,
    manual: bool = False,
    series_number: int = 9000,
    series_description: str | None = None,
) -> list:
    """Return DICOM-SEG objects (``pydicom.Dataset``, one new series) of label masks drawn on source images.

    The sources must be single-frame images of one series. Images that share a
    plane position (the phases of a cine slice) go into separate SEG
    instances of the same series, since a SEG's frames are indexed by position.

    Args:
        source_images: The source instances (``pydicom.Dataset``), in the order of ``masks``.
        masks: ``N x H x W`` integer label maps (0 background, ``k`` = ``class_labels[k]``).
        class_labels: Class names, background first; one segment per further class.
        manual: Ground truth drawn by a person (``MANUAL``) rather than a model's output (``AUTOMATIC``).
        series_number: Series Number of the new SEG series.
        series_description: Series Description (default names DIGITS Core).

    Raises:
        SegmentationError: Shapes or labels do not fit the sources.
    """
    import highdicom as hd
    from pydicom.uid import generate_uid

    masks = np.asarray(masks)
    if masks.ndim != 3 or len(masks) != len(source_images) or not len(masks):
        raise SegmentationError(
            f"need one H x W mask per source image: {len(source_images)} images, masks {masks.shape}"
        )
    if len(class_labels) < 2:
        raise SegmentationError("need at least two classes (background and one segment)")
    if masks.min() < 0 or masks.max() >= len(class_labels):
        raise SegmentationError(f"mask values must lie in 0..{len(class_labels) - 1} (one per class)")
    description = (
        series_description
        or (
            "Ground truth"
            if manual
            else f"DIGITS Core prediction of {getattr(source_images[0], 'SeriesDescription', 'series')}"
        )
    )[:64]
    series_uid = generate_uid()
    segments = _segment_descriptions(class_labels, manual)
    objects = []
    for number, group in enumerate(_position_groups(source_images), start=1):
        try:
            with warnings.catch_warnings():
                # highdicom warns about single-component patient names copied from the sources: not ours to fix.
                warnings.filterwarnings("ignore", message=".*person name.*", category=UserWarning)
                seg = hd.seg.Segmentation(
                    source_images=[_header_for_seg(source_images[i]) for i in group],
                    pixel_array=masks[group].astype(np.uint8),
                    segmentation_type=hd.seg.SegmentationTypeValues.BINARY,
                    segment_descriptions=segments,
                    series_instance_uid=series_uid,
                    series_number=int(series_number),
                    sop_instance_uid=generate_uid(),
                    instance_number=number,
                    manufacturer="DIGITS Core",
                    manufacturer_model_name="digits-data-dicomweb",
                    software_versions="0.1",
                    device_serial_number="1",
                    omit_empty_frames=False,
                    content_label="MANUAL" if manual else "DIGITS",
                )
        except (ValueError, AttributeError, TypeError) as exc:
            raise SegmentationError(f"cannot write a DICOM-SEG for these source images: {exc}") from exc
        seg.SeriesDescription = description
        objects.append(seg)
    return objects


__all__ = ["SegmentationLabels", "SegmentationError", "build_segmentations", "CODING_SCHEME"]
