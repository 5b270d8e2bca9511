"""*Test a volume* on a volume model's page (``unet3d``, ``unet2.5d``): a volume in, its label volume back.

The source is an uploaded NIfTI file, a NIfTI file or DICOM series folder on the server (through the
data-roots gate of the 2-D form, ``check_inference_path``), or a DICOMweb series
(the data plugin's inference form); an optional ground-truth label (upload or server path) adds
per-class Dice and HD95. The inference worker runs
:func:`digits_core.engine.volume_infer.infer_volume`, the function behind ``digits infer`` and the
Python API, into a temporary folder of the job; the result is stored like a 2-D run
(:mod:`digits_core.web.inference_results`: a page at ``/models/ID/inference/RID`` with the ``volume``
view) with the files it wrote (``NAME_seg.nii.gz`` with the source's affine, ``NAME_seg.dcm`` for a
series) moved into the result's folder and downloaded from ``…/files/NAME``. A source or label the
plugin refuses (a 2-D picture, a label of another shape) shows its message on its own field.
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flask import request

from ..errors import FormValidationError
from .context import request_data_roots, web_context
from .inference_worker import run_in_worker
from .results_store import store_and_redirect


def infer_volume_from_form(
    job,
    view_title: str,
    view_config: dict,
    inference_form: dict | None,
    *,
    check_path: Callable[..., str],
    save_uploads: Callable[[Any, dict], dict],
):
    """Run the posted volume form of ``job`` and redirect to the stored result (303).

    Args:
        job: The volume model job.
        view_title: The ``volume`` view's title (shown with the result).
        view_config: The view's validated options (``opacity``).
        inference_form: The data plugin's inference form values (``input_mode=plugin``), else ``None``.
        check_path: The 2-D form's server-path check (``(raw, field) -> path``: given, absolute, under
            the data roots, readable).
        save_uploads: The 2-D form's upload saver (``(job, {field: upload}) -> {field: saved path}``).

    Raises:
        FormValidationError: On the field at fault: no source, a path outside the data roots, a source
            that is not a volume, a label that does not fit it.
    """
    body: dict = {
        "model": str(job.path),
        "jobs_dir": str(web_context().jobs_dir),
        "view_config": view_config,
        "data_roots": request_data_roots(),
    }
    mode = request.form.get("input_mode", "upload")
    uploads: list[Path] = []
    if mode == "plugin":
        body.update(inputs=[], inference_form=inference_form, fields={"input": "dicomweb_series"})
        described = "a DICOMweb series (the data plugin's inference form)"
    elif mode == "path":
        body.update(
            inputs=[check_path(request.form.get("server_path", ""))],
            fields={"input": "server_path", "label": "label_path"},
        )
        if request.form.get("label_path", "").strip():
            body["label"] = check_path(request.form["label_path"], "label_path")
        described = body["inputs"][0]
    else:
        chosen = request.files.get("volume_file")
        if chosen is None or not chosen.filename:
            raise FormValidationError({"volume_file": ["Choose a NIfTI file (.nii, .nii.gz) to upload."]}, "inference")
        # One folder each: an image and its label often share a file name (imagesTr/ and labelsTr/).
        image = save_uploads(job, {"volume_file": chosen})["volume_file"]
        label = save_uploads(job, {"label_file": request.files.get("label_file")})["label_file"]
        uploads = [Path(p).parent for p in (image, label) if p]
        body.update(inputs=[image], fields={"input": "volume_file", "label": "label_file"})
        if label:
            body["label"] = label
        described = Path(chosen.filename.replace("\\", "/")).name
    out = job.path / "inference" / f".volume-{secrets.token_hex(4)}"
    body["out_dir"] = str(out)
    try:
        result = run_in_worker("infer_volume", body)
        return store_and_redirect(job, "volume", view_title, result, described)
    finally:  # the files were moved into the stored result; the uploads are in its page
        shutil.rmtree(out, ignore_errors=True)
        for folder in uploads:
            shutil.rmtree(folder, ignore_errors=True)
