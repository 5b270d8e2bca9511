"""``digits infer``: run a trained model on images and write a results page.

::

    digits infer --model ID [--epoch N] [--view VIEW_ID] [--view-option k=v ...]
                 INPUT... [--out report.html | --json] [--top N]
    digits infer --model ID --<inference-form-field> VALUE ...   # the data plugin's inference form

INPUTs are image files, folders (every image below, recursively) or list
files (``path [label]`` per line). The options of every installed data
plugin's inference form are added to this command (``--help`` lists them
per plugin); the model's own plugin validates them. When ``--model`` is
given, the model's data plugin builds its form from the dataset's userdata
(as the web page does), so choices a DIGITS 6 style ``get_inference_form(self)``
reads from the dataset (Sunnybrook's validation records) are accepted.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import warnings
from collections.abc import Iterator
from typing import Any

from ..errors import FormValidationError
from .output import plugin_output_to_stderr

logger = logging.getLogger("digits_core.cli")
#: Libraries whose log records `digits infer` reports after the progress line, with the skipped inputs.
LIBRARY_LOGGERS = ("pydicom", "PIL", "highdicom")
_OWN = {
    "model",
    "epoch",
    "view",
    "view_option",
    "out",
    "json",
    "top",
    "batch_size",
    "inputs",
    "include_images",
    "max_errors",
    "visualize",
}


def _option_value(argv: list[str], option: str) -> str | None:
    """The value given to ``option`` in ``argv`` (``--model ID`` or ``--model=ID``), or None."""
    for i, word in enumerate(argv):
        if word == option and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(option + "="):
            return word[len(option) + 1 :]
    return None


def _model_dataset(argv: list[str]) -> tuple[str | None, dict]:
    """The data plugin id and userdata of the dataset of the model ``--model`` names (job files only, no TensorFlow).

    ``(None, {})`` when no model is named or it cannot be read (``run`` then reports that properly).
    """
    model = _option_value(argv, "--model")
    if not model:
        return None, {}
    try:
        from ..datasets import open_dataset  # the job machinery: only when --model is given
        from ..jobs import JobStore  # (same)

        jobs_dir = _option_value(argv, "--jobs-dir")
        job = JobStore(jobs_dir).get(model, kind="model")
        dataset = open_dataset(str(job.data.get("dataset_id") or ""), jobs_dir)
        return dataset.plugin_id, dict(dataset.userdata)
    except Exception as exc:  # noqa: BLE001 - only the options depend on it
        logger.debug("--model %s: no dataset userdata for the inference form options: %s", model, exc)
        return None, {}


def _add_plugin_form_options(parser: Any, argv: list[str] | None = None) -> dict[str, list[str]]:
    """Add the inference form fields of every data plugin; return ``{plugin_id: field names}``.

    A field several plugins share (e.g. ``image_path`` of every image plugin)
    becomes one option, listed under a heading that names all of them; the
    others are listed under their own plugin. The plugin of the model named
    by ``--model`` in ``argv`` gets its dataset's userdata. A plugin whose
    inference form is an instance method that cannot be built without a
    dataset (a DIGITS 6 plugin reading its data in ``__init__``) is left out
    quietly: its options come with ``--model``.
    """
    from ..forms import add_form_arguments, user_fields
    from ..plugins.contract import inference_form, needs_instance
    from ..plugins.registry import registry

    model_plugin, model_userdata = _model_dataset(argv or [])

    fields: dict[str, list[str]] = {}
    forms = {}
    try:
        plugins = registry.data_ingestions()
    except Exception as exc:  # noqa: BLE001 - never let plugins break the CLI
        logger.warning("Could not list data plugins for `digits infer` options: %s", exc)
        return fields
    for plugin_id, plugin in sorted(plugins.items()):
        userdata = model_userdata if plugin_id == model_plugin else None
        try:
            with plugin_output_to_stderr():  # the plugin's __init__ may print (DIGITS 6 bAbI)
                form = inference_form(plugin, userdata)
            if form is None:
                continue
            fields[plugin_id] = [f.name for f in user_fields(form(meta={"csrf": False}))]
            forms[plugin_id] = form
        except Exception as exc:  # noqa: BLE001
            if userdata is None and needs_instance(plugin, "get_inference_form"):
                logger.debug('Data plugin "%s": its inference form needs a dataset (--model): %s', plugin_id, exc)
            else:
                logger.warning('Data plugin "%s": its inference form cannot become options: %s', plugin_id, exc)
    owners: dict[str, list[str]] = {}
    for plugin_id, names in fields.items():
        for name in names:
            owners.setdefault(name, []).append(plugin_id)
    groups: dict[tuple, list[str]] = {}
    for name, owner_ids in owners.items():
        groups.setdefault(tuple(owner_ids), []).append(name)
    for plugin_ids, names in sorted(groups.items(), key=lambda item: (len(item[0]), item[0])):
        quoted = ", ".join(f'"{p}"' for p in plugin_ids)
        title = f"inference inputs of data plugin{'s' if len(plugin_ids) > 1 else ''} {quoted}"
        try:
            add_form_arguments(parser, forms[plugin_ids[0]], title=title, only=names)
        except Exception as exc:  # noqa: BLE001
            logger.warning("Inference form options of %s cannot be added: %s", quoted, exc)
    return fields


def register(subparsers: Any) -> None:
    """Add the ``infer`` command."""
    parser = subparsers.add_parser(
        "infer",
        help="run a trained model on images (results page or JSON)",
        description="Classify or segment images with a trained model and render the results with a view "
        "plugin into one self-contained HTML page (--out) or JSON (--json). Labelled list files add "
        "accuracy figures and a confusion matrix (classification) or Dice/IoU (segmentation).",
        conflict_handler="resolve",
    )
    from . import current_argv  # the package imports this module: at call time

    plugin_fields = _add_plugin_form_options(parser, current_argv())
    parser.add_argument("--model", required=True, metavar="ID", help="model job id (or unique prefix)")
    parser.add_argument("--epoch", type=float, default=None, metavar="N", help="snapshot epoch (default: the last)")
    parser.add_argument(
        "--view",
        default=None,
        metavar="VIEW_ID",
        help="view plugin (default: the model task's default view: $DIGITS_DEFAULT_VIEWS, the settings file, "
        "else the bundled one); see `digits plugins`",
    )
    parser.add_argument(
        "--view-option",
        action="append",
        default=[],
        metavar="K=V",
        help="a view option, e.g. top_n=3 or opacity=0.3 (repeatable)",
    )
    parser.add_argument("--out", metavar="FILE", help="write the HTML page (or, with --json, the JSON) to FILE")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a text summary")
    parser.add_argument("--include-images", action="store_true", help="keep the view's PNG data URIs in JSON")
    parser.add_argument(
        "--top",
        type=int,
        default=None,
        metavar="N",
        help="classes listed per input (default: the view's top_n option, else 5)",
    )
    parser.add_argument("--batch-size", type=int, default=64, metavar="N", help="inputs per network call (default: 64)")
    parser.add_argument(
        "--max-errors",
        default=None,
        metavar="X",
        help="inputs that may fail (skipped and listed) before inference fails: a count (10), "
        "a fraction (0.05) or a percentage (5%%) (default: 5%%)",
    )
    parser.add_argument(
        "--visualize",
        metavar="FILE",
        help="one input: write every layer's activations and weights (statistics, histograms, "
        "PNG pictures) as JSON to FILE",
    )
    parser.add_argument("inputs", nargs="*", metavar="INPUT", help="image files, folders or list files (path [label])")
    parser.set_defaults(handler=run, plugin_fields=plugin_fields)


def parse_view_options(items: list[str]) -> dict[str, str]:
    """Turn ``["k=v", ...]`` into a dict.

    Raises:
        FormValidationError: An item has no ``=``.
    """
    options = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise FormValidationError({"view_option": [f"expected k=v, got {item!r}"]}, "--view-option")
        options[key.strip().replace("-", "_")] = value
    return options


def _form_values(args: argparse.Namespace, plugin_fields: dict[str, list[str]]) -> dict:
    from ..forms import form_values_from_namespace

    names = sorted({n for names in plugin_fields.values() for n in names} - _OWN)
    return form_values_from_namespace(args, names)


def _print_summary(result: Any) -> None:
    from .output import print_table

    rows = []
    for sample in result.samples:
        if sample.top is not None:
            best = sample.top[0]
            rows.append(
                [
                    sample.input_id,
                    best["label"],
                    f"{best['probability'] * 100:.2f}%",
                    "" if sample.ground_truth is None else str(sample.ground_truth),
                ]
            )
        elif sample.detections is not None:  # detection: the boxes found, best first
            found = ", ".join(d["class"] for d in sample.detections[:6]) + (
                " ..." if len(sample.detections) > 6 else ""
            )
            truth = "" if sample.ground_truth is None else f"{int((sample.ground_truth[:, 0] > 0).sum())} boxes"
            rows.append(
                [
                    sample.input_id,
                    f"{len(sample.detections)} boxes: {found}" if found else "0 boxes",
                    f"{sample.detections[0]['score'] * 100:.1f}%" if sample.detections else "",
                    truth,
                ]
            )
        elif sample.labels is not None:  # multi-label: the labels at or above their thresholds, best first
            found = ", ".join(item["label"] for item in sample.labels[:6]) + (" ..." if len(sample.labels) > 6 else "")
            names = result.model.class_labels or []
            truth = (
                ""
                if sample.ground_truth is None
                else ", ".join(
                    names[k] if k < len(names) else str(k) for k, v in enumerate(sample.ground_truth.reshape(-1)) if v
                )
            )
            best = f"{sample.labels[0]['probability'] * 100:.1f}%" if sample.labels else ""
            rows.append([sample.input_id, found or "(no label)", best, truth])
        elif result.model.task == "image-to-image":
            import numpy as np

            shape = "x".join(str(d) for d in sample.output.shape)
            error = (
                ""
                if sample.ground_truth is None
                else f"MAE {float(np.abs(np.clip(sample.output, 0, 1) - sample.ground_truth).mean()):.4g}"
            )
            rows.append([sample.input_id, f"image {shape}", "", error])
        elif sample.output.ndim == 3:
            import numpy as np

            classes = (
                np.unique(np.argmax(sample.output, axis=-1))
                if sample.output.shape[-1] > 1
                else np.unique(sample.output[..., 0] >= 0.5).astype(int)
            )
            rows.append(
                [
                    sample.input_id,
                    "classes " + ",".join(str(int(c)) for c in classes),
                    "",
                    "" if sample.ground_truth is None else "mask",
                ]
            )
        else:
            rows.append(
                [
                    sample.input_id,
                    " ".join(f"{v:.4g}" for v in sample.output.reshape(-1)[:8]),
                    "",
                    "" if sample.ground_truth is None else str(sample.ground_truth),
                ]
            )
    print_table(["input", "prediction", "probability", "truth"], rows)
    if result.metrics:
        m = result.metrics
        print(
            f"\ntop-1 accuracy {m['top1_accuracy'] * 100:.2f}%, top-{m['top_k']} accuracy "
            f"{m['top_k_accuracy'] * 100:.2f}% over {m['count']} labelled inputs"
        )
    print("\nUse --out report.html for the full results page, --json for machines.")


@contextlib.contextmanager
def library_messages() -> Iterator[list[str]]:
    """Collect the warnings and log records of libraries (pydicom, PIL) while inputs are read.

    Yields:
        A list that holds, once the block ends, each distinct message once, in order.
    """
    collected: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            collected.append(f"{record.name}: {record.getMessage()}")

    handler, saved = _Collect(level=logging.WARNING), {}
    for name in LIBRARY_LOGGERS:
        lib = logging.getLogger(name)
        saved[name] = lib.propagate
        lib.addHandler(handler)
        lib.propagate = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield collected
        finally:
            for name in LIBRARY_LOGGERS:
                logging.getLogger(name).removeHandler(handler)
                logging.getLogger(name).propagate = saved[name]
            collected.extend(f"{w.category.__name__}: {w.message}" for w in caught)
            collected[:] = list(dict.fromkeys(collected))


def _plugin_options_hint(args: argparse.Namespace) -> str:
    """Where a model whose data plugin reads its own inputs takes them (``""`` when it has no such options)."""
    argv = ["--model", args.model] + (["--jobs-dir", str(args.jobs_dir)] if args.jobs_dir else [])
    plugin_id, _ = _model_dataset(argv)
    names = (getattr(args, "plugin_fields", None) or {}).get(plugin_id) if plugin_id else None
    if not names:
        return ""
    flags = ", ".join("--" + name.replace("_", "-") for name in names)
    return (
        f'Model {args.model} reads its inputs with data plugin "{plugin_id}": give them with its options '
        f"({flags}); see `digits infer --model {args.model} --help`."
    )


def run(args: argparse.Namespace) -> int:
    """Run inference and write or print the results."""
    from ..engine.volume_infer import is_volume_model  # reads model.json only; keeps `digits infer --help` light

    if is_volume_model(args.model, args.jobs_dir):  # NIfTI / DICOM series in, label volumes out (issue 29)
        from .volume_infer_cmd import run_volume  # only volume models need it

        return run_volume(args, _form_values(args, args.plugin_fields))
    from ..inference.runner import infer
    from .output import print_json

    form_data = _form_values(args, args.plugin_fields)
    progress = None
    if sys.stderr.isatty():

        def progress(done: Any, total: Any) -> None:
            print(f"\rinference: {done}/{total}", end="" if done < total else "\n", file=sys.stderr)

    from ..inference.inputs import UnsupportedInputError

    # a pydicom warning would land inside the progress line; a plugin's print() before the JSON
    with library_messages() as library, plugin_output_to_stderr():
        try:
            result = infer(
                args.model,
                args.inputs,
                epoch=args.epoch,
                view_id=args.view,
                view_config=parse_view_options(args.view_option),
                form_data=form_data or None,
                jobs_dir=args.jobs_dir,
                top_n_classes=args.top,
                batch_size=args.batch_size,
                progress=progress,
                max_errors=args.max_errors,
            )
        except UnsupportedInputError as exc:
            hint = _plugin_options_hint(args)
            if hint:
                raise UnsupportedInputError(f"{exc} {hint}") from exc
            raise
    if args.visualize:
        _write_visualizations(result, args.visualize)
    for skipped in result.errors:
        print(f"skipped: {skipped['input']}: {skipped['error']}", file=sys.stderr)
    for message in library:
        print(f"warning: {message}", file=sys.stderr)
    for note in result.notes:
        print(note, file=sys.stderr)
    if args.json:
        with plugin_output_to_stderr():  # the view's process_data and templates run here
            data = result.to_json(include_images=args.include_images)
        if library:
            data["warnings"] = list(library)
        if args.out:
            import json

            with open(args.out, "w", encoding="utf-8") as handle:
                json.dump(data, handle, indent=2)
            print(f"wrote {args.out}", file=sys.stderr)
        else:
            print_json(data)
        return 0
    if args.out:
        with plugin_output_to_stderr():
            result.save_html(args.out)
        print(f"wrote {args.out} ({len(result.samples)} inputs, view {result.view_id})")
        return 0
    _print_summary(result)
    return 0


def _write_visualizations(result: Any, path: str) -> None:
    """Write the layer visualizations of the one input to ``path`` (JSON, written whole or not at all)."""
    import json
    import os

    from ..inference.visualize import visualize_result

    data = visualize_result(result).to_json()
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(tmp, path)
    print(f"wrote {path} ({len(data['layers'])} layers of {data['input_id']})", file=sys.stderr)
