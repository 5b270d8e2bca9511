"""``digits infer`` with a volume model: each INPUT (NIfTI file or DICOM series folder) → label volume files.

``--out FOLDER`` (default: the current folder) receives ``NAME_seg.nii.gz``
(the source's affine) and, for a DICOM series, ``NAME_seg.dcm`` (multi-frame
DICOM-SEG); ``--out PAGE.html`` writes them next to a page that shows every
case with the ``volume`` view (slice scrolling with the label overlay);
``--json`` prints the files and the volume per class in mL.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..engine.volume_infer import infer_volume
from ..errors import FormValidationError
from ..inference.volume_report import volume_cases
from .output import plugin_output_to_stderr, print_json


def write_page(results: Any, path: Path, model: str, jobs_dir: Any) -> None:
    """One self-contained HTML page: every result through the ``volume`` view plugin."""
    parts = [html for html, _ in volume_cases(results, model, jobs_dir)]
    path.write_text(
        '<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" '
        'content="width=device-width, initial-scale=1"><title>Volumes</title></head><body>'
        + "\n".join(parts)
        + "</body></html>",
        encoding="utf-8",
    )


def run_volume(args: argparse.Namespace, form_data: dict | None = None) -> int:
    """Infer every input with the volume model ``args.model``; print what was written.

    Args:
        args: The parsed ``digits infer`` arguments.
        form_data: The data plugin's inference form values given (``--dicomweb-series UID --store``).
    """
    if not args.inputs and not (form_data or {}).get("dicomweb_series"):
        raise FormValidationError(
            {"inputs": ["give NIfTI files (.nii, .nii.gz), DICOM series folders or --dicomweb-series UID"]},
            "digits infer",
        )
    page = Path(args.out) if args.out and args.out.lower().endswith(".html") else None
    out_dir = str(page.parent) if page is not None else (args.out or ".")
    with plugin_output_to_stderr():  # the data plugin's print()s never precede the JSON
        results = infer_volume(
            args.model, list(args.inputs), jobs_dir=args.jobs_dir, out_dir=out_dir, form_data=form_data or None
        )
    for r in results:
        if r.note:
            print(r.note, file=sys.stderr)
    if page is not None:
        write_page(results, page, args.model, args.jobs_dir)
    if args.json:
        print_json(
            [
                {"input": r.source, "files": r.files, "shape": list(r.label.shape), "volumes_ml": r.volumes_ml}
                for r in results
            ]
        )
        return 0
    for r in results:
        shown = ", ".join(f"{name} {ml:.1f} mL" for name, ml in r.volumes_ml.items())
        print(f"{r.source}: {shown}")
        for path in r.files:
            print(f"  wrote {path}")
    if page is not None:
        print(f"wrote {page} (volume view)")
    return 0
