"""What a Keras model is made of: layers, output shapes, parameter counts and the layer graph.

The web UI's network page (DIGITS's "Visualize" button) shows this. It needs
TensorFlow, so it runs in the inference worker process, never in the web
server: :func:`summarize_model_job` for a model job (its last snapshot, or the
network it will build when no snapshot exists yet) and
:func:`summarize_network` for a network and dataset chosen on the New Model
form (a built-in or plugin network by name, or custom code).

The summary is plain JSON::

    {"name": "lenet", "source": {...}, "input_shape": [28, 28, 1],
     "layers": [{"name", "type", "output_shape", "params", "trainable_params", "inbound": [layer names]}],
     "total_params", "trainable_params", "non_trainable_params"}

``output_shape`` has ``null`` for the batch axis (a list of shapes for a
layer with several outputs, ``"multiple"`` for a layer used more than once);
``inbound`` lists the layers feeding each layer, which is the graph.
"""

from __future__ import annotations

import collections
import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import TrainingError


def _shape(layer: Any) -> Any:
    try:
        output = layer.output
    except (AttributeError, ValueError, RuntimeError):  # a shared layer has one output per call
        return "multiple"
    if isinstance(output, (list, tuple)):
        return [list(t.shape) for t in output]
    if isinstance(output, dict):
        return {str(k): list(t.shape) for k, t in output.items()}
    return list(output.shape)


def _count(weights: Any) -> int:
    total = 0
    for weight in weights:
        size = 1
        for dim in weight.shape:
            size *= int(dim)
        total += size
    return total


def _history_names(value: Any, found: list[str]) -> None:
    """Collect the producing layers named in a serialized call (``keras_history``), in order."""
    if isinstance(value, dict):
        if value.get("class_name") == "__keras_tensor__":
            history = (value.get("config") or {}).get("keras_history")
            if history and history[0] not in found:
                found.append(history[0])
            return
        for item in value.values():
            _history_names(item, found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _history_names(item, found)


@contextlib.contextmanager
def _fresh_layer_names() -> Iterator[None]:
    """Auto-named layers get the names a fresh training process gives them (``dense``, not ``dense_7``).

    Keras numbers auto-named layers per process; the long-lived worker builds many previews.
    """
    try:
        from keras.src.backend.common import global_state
    except ImportError:  # another Keras layout: names may carry a suffix
        yield
        return
    saved = global_state.get_global_attribute("object_name_uids")
    global_state.set_global_attribute("object_name_uids", collections.defaultdict(int))
    try:
        yield
    finally:
        global_state.set_global_attribute("object_name_uids", saved)


def summarize_model(model: Any, source: dict | None = None) -> dict:
    """Describe a built Keras model (functional or Sequential).

    Args:
        model: A built ``keras.Model``.
        source: Where the model came from (stored as ``"source"``).

    Returns:
        The summary described in the module docstring.
    """
    config = model.get_config()
    inbound: dict[str, list[str]] = {}
    for entry in config.get("layers") or []:
        found: list[str] = []
        _history_names(entry.get("inbound_nodes") or [], found)
        inbound[str(entry.get("name") or (entry.get("config") or {}).get("name"))] = found
    layers = []
    names = [layer.name for layer in model.layers]
    sequential = not any(inbound.values())  # Sequential configs carry no call graph: each layer feeds the next
    if sequential and model.inputs and (not model.layers or type(model.layers[0]).__name__ != "InputLayer"):
        layers.append(
            {
                "name": "input",
                "type": "InputLayer",
                "output_shape": list(model.inputs[0].shape),
                "params": 0,
                "trainable_params": 0,
                "inbound": [],
            }
        )
    for i, layer in enumerate(model.layers):
        if sequential:
            feeds = [layers[-1]["name"]] if layers else []
        else:
            feeds = [name for name in inbound.get(layer.name, []) if name in names]
        trainable = _count(layer.trainable_weights)
        layers.append(
            {
                "name": layer.name,
                "type": type(layer).__name__,
                "output_shape": _shape(layer),
                "params": _count(layer.weights),
                "trainable_params": trainable,
                "inbound": feeds,
            }
        )
    total = _count(model.weights)
    trainable = _count(model.trainable_weights)
    return {
        "name": model.name,
        "source": source or {},
        "input_shape": list(model.inputs[0].shape[1:]) if model.inputs else None,
        "layers": layers,
        "total_params": total,
        "trainable_params": trainable,
        "non_trainable_params": total - trainable,
    }


def summarize_model_job(job_path: str | os.PathLike, jobs_dir: str | os.PathLike | None = None) -> dict:
    """Summarize a model job: its last snapshot, else the network its options will build.

    Args:
        job_path: The model job folder.
        jobs_dir: The jobs folder (to find the dataset).

    Raises:
        TrainingError: No snapshot and the network cannot be built (message says why).
    """
    from . import jobio
    from .snapshots import load_snapshot

    folder = Path(job_path)
    try:
        info = jobio.read_model_info(folder)
    except (OSError, ValueError, TrainingError):
        info = {}
    snaps = info.get("snapshots") or []
    if snaps:
        model = load_snapshot(folder, epoch=None, jobs_dir=jobs_dir)
        epoch = float(snaps[-1]["epoch"])
        return summarize_model(
            model,
            {
                "kind": "snapshot",
                "epoch": int(epoch) if epoch.is_integer() else epoch,
                "file": snaps[-1]["file"],
                "network": info.get("network"),
            },
        )
    from ..jobs import Job

    job = Job.load(folder)
    options = dict(job.train_options or {})
    network = options.get("network") or job.network
    dataset = options.get("dataset") or job.dataset_id
    if not network or not dataset:
        raise TrainingError(f"Model job {job.id} names no network or dataset to build.")
    return summarize_network(
        network,
        dataset,
        jobs_dir or folder.parent,
        crop_size=options.get("crop_size"),
        network_params=options.get("network_params"),
        task=options.get("task"),
    )


def summarize_network(
    network: str | None,
    dataset: str,
    jobs_dir: str | os.PathLike | None = None,
    *,
    custom_code: str | None = None,
    crop_size: int | None = None,
    network_params: dict | None = None,
    task: str | None = None,
) -> dict:
    """Build a network for a dataset, as training would, and summarize it (no training, no job).

    Args:
        network: A built-in or plugin network name, or a network file (ignored with ``custom_code``).
        dataset: The dataset job id (its image size, classes and task decide the shapes).
        jobs_dir: The jobs folder.
        custom_code: Python source defining ``build_model`` (the New Model form's custom network).
        crop_size: The training option (the network then sees ``crop × crop`` inputs).
        network_params: ``build_model`` keyword parameters.
        task: The training task (default: from the dataset's labels).

    Raises:
        TrainingError: Unknown network, broken custom code (message points at its line), a network
            that does not build for these inputs.
        DatasetError: No such dataset.
    """
    from ..datasets import open_dataset
    from .networks import resolve_network
    from .networks.custom import call_builder
    from .pipeline import StageSource
    from .tasks import task_for_label_kind, task_named

    reader = open_dataset(dataset, jobs_dir)
    chosen = task_named(task) if task else task_for_label_kind(reader.label_kind)
    if chosen is None:
        raise TrainingError(f'Dataset "{reader.id}" has labels of kind "{reader.label_kind}"; no task fits them.')
    h, w, c = (int(d) for d in reader.feature_shape())
    input_shape = (int(crop_size), int(crop_size), c) if crop_size else (h, w, c)
    if chosen.bind is not None:
        chosen = chosen.bind(chosen, input_shape)
    num_outputs = chosen.num_outputs(reader, StageSource(reader, "train", False, fix_labels=chosen.fix_labels))
    tmp = None
    try:
        if custom_code is not None:
            handle, tmp = tempfile.mkstemp(prefix="digits-network-", suffix=".py")
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(custom_code)
            spec = resolve_network(tmp)
            label = "custom code"
        else:
            spec = resolve_network(network or "")
            label = spec.name
        with _fresh_layer_names():
            model, _, _ = call_builder(
                spec.build, input_shape, num_outputs, dict(network_params or {}), origin=label, path=tmp or spec.path
            )
    except TrainingError as exc:
        if tmp:  # the user typed code, not a file: say "custom code:LINE" rather than a temporary path
            raise TrainingError(str(exc).replace(tmp, "custom code")) from exc
        raise
    finally:
        if tmp:
            os.unlink(tmp)
            # The long-lived worker builds many previews: drop the module the code was loaded as.
            for name in [
                n
                for n in sys.modules
                if n.startswith("digits_user_network_")
                and getattr(sys.modules[n], "__file__", None) == str(Path(tmp).resolve())
            ]:
                del sys.modules[name]
    return summarize_model(
        model,
        {
            "kind": "network",
            "network": label,
            "dataset": reader.id,
            "task": chosen.name,
            "num_outputs": int(num_outputs),
        },
    )
