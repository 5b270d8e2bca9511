"""``digits infer`` with a volume model: each INPUT (NIfTI file or DICOM series folder) → label volume files.

``--out FOLDER`` (default: the current folder) receives ``NAME_seg.nii.gz``
(the source's affine) and, for a DICOM series, ``NAME_seg.dcm`` (multi-frame
DICOM-SEG); ``--json`` prints the files and the volume per class in mL.
"""

from __future__ import annotations


def run_volume(args) -> int:
    """Infer every input with the volume model ``args.model``; print what was written."""
    from ..engine.volume_infer import infer_volume
    from ..errors import FormValidationError
    from .output import print_json

    if not args.inputs:
        raise FormValidationError({"inputs": ["give NIfTI files (.nii, .nii.gz) or DICOM series folders"]},
                                  "digits infer")
    results = infer_volume(args.model, list(args.inputs), jobs_dir=args.jobs_dir, out_dir=args.out or ".")
    if args.json:
        print_json([{"input": r.source, "files": r.files, "shape": list(r.label.shape), "volumes_ml": r.volumes_ml}
                    for r in results])
        return 0
    for r in results:
        shown = ", ".join(f"{name} {ml:.1f} mL" for name, ml in r.volumes_ml.items())
        print(f"{r.source}: {shown}")
        for path in r.files:
            print(f"  wrote {path}")
    return 0
