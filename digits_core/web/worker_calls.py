"""Short jobs the web UI runs in a separate process: inference and export.

Both load a trained Keras model (and so TensorFlow, and a custom network's
code); the web server itself never does. ``run_worker(kind, request)``
starts ``python -m digits_core.web.worker_calls KIND REQUEST.json RESULT.json``,
waits for it and returns the result dict; a :class:`DigitsError` raised in
the worker comes back as a :class:`DigitsError` with the same message.
The web app runs inference in a long-lived worker instead
(:mod:`digits_core.web.inference_worker`, same requests, same :func:`handle`),
so the model cache stays warm; export still uses a one-off process.

A one-off worker runs in its own session and stops with its server: the
stopping server sends it SIGTERM (:func:`stop_workers`), which stops it as
Ctrl-C stops ``digits export`` (what it was building is removed, no result
is written), and it signals itself so when the server that started it is
gone (even killed by ``kill -9``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

from ..errors import DigitsError, DiskFullError, FormValidationError, InferenceError
from ..executors.worker import PARENT_PID_ENV, watch_parent
from ..limits import request_pixel_budget

#: The one-off workers running now (their server stops them when it stops: :func:`stop_workers`).
_running: set[subprocess.Popen] = set()
_running_lock = threading.Lock()


def run_worker(kind: str, request: dict, *, timeout: float = 300) -> dict:
    """Run ``kind`` ("infer" or "export") in a worker process and return its result.

    Raises:
        DigitsError: The worker reported a user error, crashed or timed out.
    """
    with tempfile.TemporaryDirectory(prefix="digits-web-") as tmp:
        req, res = Path(tmp) / "request.json", Path(tmp) / "result.json"
        req.write_text(json.dumps(request), encoding="utf-8")
        proc = subprocess.Popen(
            [sys.executable, "-m", "digits_core.web.worker_calls", kind, str(req), str(res)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
            env={**os.environ, PARENT_PID_ENV: str(os.getpid())},
            start_new_session=True,  # its parent watch may kill its own process group, never the server's
        )
        with _running_lock:
            _running.add(proc)
        try:
            _out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            proc.communicate()
            raise InferenceError(f"The {kind} worker did not finish within {timeout:.0f} s.") from exc
        finally:
            with _running_lock:
                _running.discard(proc)
        if res.is_file():
            result = json.loads(res.read_text(encoding="utf-8"))
            if "error" in result:
                raise (DiskFullError if result.get("disk_full") else DigitsError)(result["error"])
            return result
        tail = (err or "").strip().splitlines()[-5:]
        raise InferenceError(f"The {kind} worker failed (exit code {proc.returncode}): " + " | ".join(tail))


def stop_workers(timeout: float = 30.0) -> None:
    """SIGTERM every one-off worker still running (its server is stopping); SIGKILL any left after ``timeout`` s."""
    with _running_lock:
        procs = list(_running)
    for proc in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)


def _do_infer(request: dict) -> dict:
    from ..inference import infer
    from ..inference.report import render_fragments

    epoch = request.get("epoch")  # a number: "1.5" is the mid-epoch snapshot, never truncated
    epoch = float(epoch) if epoch not in (None, "") else None
    # JSON turns the web's (shown name, saved upload path) pairs into lists; the engine takes tuples.
    inputs = [tuple(i) if isinstance(i, list) else i for i in request.get("inputs") or ()]
    # Uploads share one pixel budget (checked again here: the server checked their headers before queueing).
    budget = request_pixel_budget() if request.get("pixel_budget") else contextlib.nullcontext()
    with budget:
        result = infer(
            request["model"],
            inputs,
            epoch=epoch,
            view_id=request.get("view") or None,
            view_config=request.get("view_config") or None,
            form_data=request.get("inference_form") or None,
            jobs_dir=request.get("jobs_dir"),
            max_errors=request.get("max_errors"),
        )
    visualizations = None
    if request.get("visualize"):  # DIGITS's "Show visualizations and statistics" (one image)
        from ..inference.visualize import visualize_result

        visualizations = visualize_result(result).to_json()
    view, processed = result.run_view()
    fragments = render_fragments(view, processed)
    return {
        "visualizations": visualizations,
        "fragments": {
            "header": None if fragments["header"] is None else str(fragments["header"]),
            "samples": [str(s) for s in fragments["samples"]],
            "summary": None if fragments["summary"] is None else str(fragments["summary"]),
        },
        "info": {str(k): str(v) for k, v in result.page_info().items()},
        "json": result.to_json(include_images=False, include_view=False),
    }


def _do_infer_volume(request: dict) -> dict:
    """A volume model over one source: its files in ``out_dir``, the ``volume`` view's fragment, mL and scores.

    ``fields`` maps the errors of the source (``"input"``) and of its ground truth (``"label"``) to the web
    form's fields, so each shows on its own field.
    """
    from ..engine.volume_infer import VolumeSourceError, infer_volume  # loads TensorFlow: in the worker only
    from ..inference.volume_report import volume_cases  # the view plugin's registry: in the worker only

    fields = request.get("fields") or {}
    sources = list(request.get("inputs") or ())
    labels = {sources[0]: request["label"]} if sources and request.get("label") else None
    try:
        results = infer_volume(
            request["model"],
            sources,
            jobs_dir=request.get("jobs_dir"),
            out_dir=request["out_dir"],
            form_data=request.get("inference_form") or None,
            labels=labels,
        )
    except VolumeSourceError as exc:
        return {"error": str(exc), "errors": {fields.get("input", "input"): [str(exc)]}}
    except FormValidationError as exc:
        return {"error": str(exc), "errors": {fields.get(k, k): v for k, v in exc.errors.items()}}
    cases = volume_cases(results, request["model"], request.get("jobs_dir"), request.get("view_config"))
    return {
        "fragments": {"header": None, "samples": [html for html, _ in cases], "summary": None},
        "files": [path for r in results for path in r.files],
        "json": {
            "volumes": [
                {
                    "input": r.source,
                    "shape": list(r.label.shape),
                    "volumes_ml": r.volumes_ml,
                    "scores": data["scores"],
                    "note": r.note,
                }
                for r, (_, data) in zip(results, cases)
            ],
            "notes": [r.note for r in results if r.note],
        },
    }


def _do_export(request: dict) -> dict:
    from ..inference.export import export_model, read_parity

    epoch = request.get("epoch")  # a number (the web's per-epoch download); None: the last snapshot
    path = export_model(
        request["job"],
        request["out"],
        epoch=float(epoch) if epoch not in (None, "") else None,
        format=request.get("format") or "savedmodel",
        quantize=request.get("quantize") or None,
        allow_mismatch=bool(request.get("allow_mismatch")),
    )
    folder = request.get("folder")  # the export's folder in the job (export_name): its parity report
    return {"path": str(path), "parity": read_parity(Path(folder)) if folder else None}


def _do_predict(request: dict) -> dict:
    """A TF Serving predict body answered by ``digits infer`` (:mod:`digits_core.inference.predict_api`)."""
    from ..inference.predict_api import predict

    epoch = request.get("epoch")
    return {
        "answer": predict(
            request["model"],
            request.get("body"),
            jobs_dir=request.get("jobs_dir"),
            epoch=float(epoch) if epoch not in (None, "") else None,
        )
    }


def _do_network(request: dict) -> dict:
    """The network page's summary: a model job's (``"job"``) or a form's network and dataset."""
    from ..engine.network_summary import summarize_model_job, summarize_network

    if request.get("job"):
        return {"summary": summarize_model_job(request["job"], request.get("jobs_dir"))}
    return {
        "summary": summarize_network(
            request.get("network"),
            request["dataset"],
            request.get("jobs_dir"),
            custom_code=request.get("custom_code"),
            crop_size=request.get("crop_size"),
            network_params=request.get("network_params"),
            task=request.get("task"),
        )
    }


def _do_top_n(request: dict) -> dict:
    """Top N per category of a classification model over the request's inputs."""
    from ..inference.top_per_class import top_images_per_class

    epoch = request.get("epoch")
    return top_images_per_class(
        request["model"],
        request.get("inputs") or (),
        int(request.get("n") or 9),
        epoch=float(epoch) if epoch not in (None, "") else None,
        jobs_dir=request.get("jobs_dir"),
        max_errors=request.get("max_errors"),
    )


def main(argv=None) -> int:
    """Worker entry point: ``KIND REQUEST.json RESULT.json``."""
    argv = sys.argv[1:] if argv is None else argv
    kind, req_path, res_path = argv
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    parent = os.environ.get(PARENT_PID_ENV)
    if parent and parent.isdigit():
        watch_parent(int(parent))  # the server stopped or died: SIGTERM to this process
    request = json.loads(Path(req_path).read_text(encoding="utf-8"))
    try:
        result = handle(kind, request)
    except KeyboardInterrupt:
        return 130  # stopped: the export's staging folder and temporary archive are gone, no result
    Path(res_path).write_text(json.dumps(result, default=str), encoding="utf-8")
    return 0


def _interrupt(_signum, _frame):
    raise KeyboardInterrupt


def handle(kind: str, request: dict) -> dict:
    """Run one ``kind`` ("infer", "infer_volume", "export", "network", "top_n" or "predict") request in this process.

    Used by :func:`main` and by the long-lived worker
    (:mod:`digits_core.web.inference_worker`).

    Returns:
        The result dict, or ``{"error": message}`` when it failed (``infer_volume`` adds ``"errors"``,
        ``{field: [messages]}``, so the page shows each message on its field; an input over a size
        limit adds ``"limit"``, the limit's environment variable).
    """
    from ..paths import confined_to

    try:
        # A request from the web server names its data roots: inputs (and paths inside list files) stay under them.
        with confined_to(request.get("data_roots")):
            return {
                "infer": _do_infer,
                "infer_volume": _do_infer_volume,
                "export": _do_export,
                "network": _do_network,
                "top_n": _do_top_n,
                "predict": _do_predict,
            }[kind](request)
    except DigitsError as exc:
        limit = getattr(exc, "limit", None)  # InputTooLargeError: the web answers 413, naming this setting
        extra = {"limit": limit.env} if limit is not None else {}
        return {"error": str(exc), **extra, **({"disk_full": True} if isinstance(exc, DiskFullError) else {})}
    except Exception as exc:  # noqa: BLE001
        traceback.print_exc()
        return {"error": f"Internal error in the {kind} worker: {type(exc).__name__}: {exc}"}


if __name__ == "__main__":
    sys.exit(main())
