"""A synthetic PACS: the synthetic Sunnybrook studies plus their ground truth as DICOM-SEG objects.

``python -m digits_data_dicomweb.synth OUT --cases 4 --size 64`` writes the
synthetic Sunnybrook set of :mod:`digits_data_sunnybrook.synth` (real DICOM
cine-MR series and expert contour files) and, for every case, DICOM-SEG
objects (``OUT/seg/<case>-<k>.dcm``, one per cardiac phase) holding the rasterized endocardium contours
as the segment "left ventricle", referencing the contoured images. Upload
``OUT/challenge_training`` and ``OUT/seg`` to a PACS (see
:mod:`digits_data_dicomweb.orthanc`) and the ``dicomweb-segmentation`` plugin
builds, from the server, the same dataset ``image-sunnybrook`` builds from the
files. ``--hard-fraction F`` makes that share of the patients hard (a
heterogeneous pool: black-blood contrast, low SNR, ...; see
:mod:`digits_data_sunnybrook.synth_hard`).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from digits_core import TRAIN

#: Sub-folder of the output holding the SEG objects.
SEG_DIR = "seg"


def write_ground_truth_segs(image_folder, contour_folder, out_dir) -> list[Path]:
    """Write the DICOM-SEG objects of each Sunnybrook case from its i-contours; return the files written.

    Args:
        image_folder: The ``challenge_training`` folder.
        contour_folder: The contours folder (``...ContoursPart3``).
        out_dir: Where to write ``<case>-<k>.dcm``.
    """
    import pydicom

    from digits_data_sunnybrook.contours import contour_mask
    from digits_data_sunnybrook.ingestion import CLASS_LABELS, SunnybrookIngestion

    from .seg import build_segmentations

    plugin = SunnybrookIngestion(image_folder=str(image_folder), contour_folder=str(contour_folder), pct_val=0, seed=0)
    by_case = defaultdict(list)
    for entry in plugin.itemize_entries(TRAIN):
        by_case[entry.case].append(entry)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for case, entries in sorted(by_case.items()):
        sources = [pydicom.dcmread(e.image) for e in entries]
        masks = np.stack([contour_mask(e.contour, (int(s.Rows), int(s.Columns))) for e, s in zip(entries, sources)])
        segs = build_segmentations(
            sources,
            masks,
            CLASS_LABELS,
            manual=True,
            series_number=9001,
            series_description="Expert contours (synthetic)",
        )
        for k, seg in enumerate(segs, start=1):
            path = out / f"{case}-{k}.dcm"
            seg.save_as(path, enforce_file_format=True)
            written.append(path)
    return written


def generate(
    out_dir, cases: int = 4, size: int = 64, seed: int = 0, slices: int = 2, hard_fraction: float = 0.0, hard_kinds=None
):
    """Write the synthetic Sunnybrook set and its SEG ground truth under ``out_dir``.

    Args:
        out_dir: Output folder.
        cases: Number of patients.
        size: Image width and height.
        seed: Random seed (the same seed gives the same files).
        slices: Short-axis slices per patient.
        hard_fraction: Share of hard patients (0: none; the others are drawn as without it).
        hard_kinds: Their kinds (default: every kind of ``digits_data_sunnybrook.synth_hard.HARD_KINDS``).

    Returns:
        ``(sunnybrook_result, seg_files)``: what :func:`digits_data_sunnybrook.synth.generate` wrote, and the SEGs.
    """
    from digits_data_sunnybrook import synth

    kinds = synth.HARD_KINDS if hard_kinds is None else tuple(hard_kinds)
    result = synth.generate(out_dir, cases, size, seed, slices, hard_fraction=hard_fraction, hard_kinds=kinds)
    segs = write_ground_truth_segs(result.image_folder, result.contour_folder, Path(out_dir) / SEG_DIR)
    return result, segs


def main(argv=None) -> int:
    """Command-line entry point (``python -m digits_data_dicomweb.synth``)."""
    from digits_data_sunnybrook.synth_hard import add_hard_arguments, parse_hard_arguments

    parser = argparse.ArgumentParser(
        prog="python -m digits_data_dicomweb.synth",
        description="Write synthetic cardiac MR studies with DICOM-SEG ground truth.",
    )
    parser.add_argument("out_dir", help="output folder")
    parser.add_argument("--cases", type=int, default=4, help="number of patients (default 4)")
    parser.add_argument("--size", type=int, default=64, help="image width and height (default 64)")
    parser.add_argument("--slices", type=int, default=2, help="short-axis slices per case (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    add_hard_arguments(parser)
    args = parser.parse_args(argv)
    kinds = parse_hard_arguments(parser, args)
    result, segs = generate(args.out_dir, args.cases, args.size, args.seed, args.slices, args.hard_fraction, kinds)
    print(f"Wrote {result.files} DICOM images for {len(result.cases)} patients and {len(segs)} DICOM-SEG objects")
    if result.hard:
        print(f"  hard patients: {', '.join(f'{c} ({k})' for c, k in result.hard.items())}")
    print(f"  images: {result.image_folder}")
    print(f"  SEGs:   {Path(args.out_dir) / SEG_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
