"""Networks: built-in ones, plugin ones (``digits_register_networks``) and custom files.

:func:`resolve_network` turns what the user typed (``lenet``, ``my_net.py``,
a plugin network name) into a :class:`NetworkSpec`; :func:`list_networks`
lists what is available for ``digits train --help`` and the web form.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import FormValidationError, TrainingError
from ...plugins.registry import registry
from . import builtin
from .custom import load_network_module


@dataclass
class NetworkSpec:
    """A network the engine can build.

    Attributes:
        name: Its name (a file's path for custom networks).
        build: ``build_model(input_shape, num_outputs, **params)``.
        source: ``"builtin"``, ``"plugin"`` or ``"file"``.
        tasks: Tasks it suits (empty: unknown, checked from its output shape).
        batch_size: Default batch size (DIGITS's per-network default).
        description: One line for listings.
        path: The file, for custom networks.
        defaults: Recommended training options (e.g. ``{"solver": "adam"}``) used
            when the user does not set them; DIGITS's global defaults apply otherwise.
        min_size: Smallest input height and width it accepts (0: any).
        weights: Pretrained weight files it can load, by name (``{"imagenet": {"file": ..., "hash": ...,
            "origin": ..., "license": ...}}``; see :mod:`digits_core.engine.weights`); empty: it takes no
            ``weights`` option.
        layouts: Input layouts it accepts (``"image"``: H×W×C; ``"volume"``: D×H×W×C).
    """

    name: str
    build: Callable
    source: str
    tasks: tuple = ()
    batch_size: int = 32
    description: str = ""
    path: str | None = None
    defaults: dict = field(default_factory=dict)
    min_size: int = 0
    weights: dict = field(default_factory=dict)
    layouts: tuple = ("image",)


_ADAM = {"solver": "adam", "learning_rate": 0.001}


def _detectnet(input_shape, num_outputs, **params):
    """``detectnet`` (see :mod:`digits_core.engine.detection.network`)."""
    from ..detection.network import build_detectnet  # Keras layers: TensorFlow loads when the model is built

    return build_detectnet(input_shape, num_outputs, **params)


BUILTIN: dict[str, NetworkSpec] = {
    "lenet": NetworkSpec(
        "lenet",
        builtin.lenet,
        "builtin",
        ("classification",),
        64,
        "LeNet (conv20-pool-conv50-pool-fc500-fc), DIGITS's small-image default",
        defaults=_ADAM,
    ),
    "lenet_multilabel": NetworkSpec(
        "lenet_multilabel",
        builtin.lenet_multilabel,
        "builtin",
        ("multilabel",),
        64,
        "LeNet with a sigmoid output: one probability per label (multi-label classification)",
        defaults=_ADAM,
    ),
    "alexnet": NetworkSpec(
        "alexnet",
        builtin.alexnet,
        "builtin",
        ("classification",),
        32,
        "AlexNet, stem and poolings adapted to the input size",
        defaults=_ADAM,
    ),
    "googlenet": NetworkSpec(
        "googlenet",
        builtin.googlenet,
        "builtin",
        ("classification",),
        32,
        "GoogLeNet-style: inception modules and global average pooling",
        defaults=_ADAM,
    ),
    "unet": NetworkSpec(
        "unet",
        builtin.unet,
        "builtin",
        ("segmentation",),
        16,
        "small U-Net (~0.47 M parameters), the default for segmentation",
        defaults={**_ADAM, "lr_policy": "fixed"},
    ),
    "fcn": NetworkSpec(
        "fcn",
        builtin.fcn,
        "builtin",
        ("segmentation",),
        16,
        "small FCN-8s-style fully convolutional network",
        defaults={**_ADAM, "lr_policy": "fixed"},
    ),
    "regression": NetworkSpec(
        "regression",
        builtin.regression,
        "builtin",
        ("regression",),
        32,
        "small CNN regressor with a linear output",
        defaults=_ADAM,
    ),
    "image2image": NetworkSpec(
        "image2image",
        builtin.image2image,
        "builtin",
        ("image-to-image",),
        16,
        "small encoder-decoder with a skip and a linear same-size output (image-to-image)",
        defaults={**_ADAM, "lr_policy": "fixed", "mean_subtraction": "none"},
    ),
    # batch 4, Adam 0.002, 10 epochs (was 32, 0.002, 24): 8x the steps per epoch, so small sets learn in the first
    # epochs, and the learning-rate steps at 75 % / 92 % fall within the first 10 (800/200 128x128 digits on clutter,
    # val mAP@0.5 at epoch 10 on two sets: batch 4 Adam 0.002 0.863 / 0.877; batch 8 Adam 0.004 0.843 / 0.863;
    # batch 4 Adam 0.003 0.826; batch 8 Adam 0.003 0.853). A batch-4 epoch costs what a batch-8 one does on a CPU.
    "detectnet": NetworkSpec(
        "detectnet",
        _detectnet,
        "builtin",
        ("detection",),
        4,
        "anchor-free multi-class detector (CenterNet-style heat map + box head, stride 4, ~0.45 M parameters)",
        defaults={
            "solver": "adam",
            "learning_rate": 0.002,
            "lr_policy": "multistep",
            "lr_step_values": "75,92",
            "lr_gamma": 0.1,
            "epochs": 10,
            "aug_scale": 0.25,
        },
    ),
}

#: The network used when none is given, per task.
DEFAULT_NETWORK = {
    "classification": "lenet",
    "segmentation": "unet",
    "regression": "regression",
    "image-to-image": "image2image",
    "detection": "detectnet",
    "multilabel": "lenet_multilabel",
}


def plugin_networks() -> dict[str, NetworkSpec]:
    """Networks added by plugins through the ``digits_register_networks`` hook.

    A plugin declares a network's metadata as attributes of its ``build_model`` callable, read here
    without building anything (no TensorFlow): ``tasks``, ``batch_size``, ``defaults``, ``min_size``,
    ``weights``, ``layouts`` and ``description`` (else the first line of its docstring); see
    :class:`NetworkSpec`.
    """
    found = {}
    for name, build in registry.networks().items():
        if callable(build):
            doc = (getattr(build, "__doc__", None) or "").strip().splitlines()
            found[str(name).lower()] = NetworkSpec(
                str(name),
                build,
                "plugin",
                tasks=tuple(getattr(build, "tasks", ()) or ()),
                batch_size=int(getattr(build, "batch_size", 32) or 32),
                description=str(getattr(build, "description", "") or (doc[0] if doc else "plugin network")),
                defaults=dict(getattr(build, "defaults", {}) or {}),
                min_size=int(getattr(build, "min_size", 0) or 0),
                weights=dict(getattr(build, "weights", {}) or {}),
                layouts=tuple(getattr(build, "layouts", ("image",)) or ("image",)),
            )
    return found


def list_networks() -> list[NetworkSpec]:
    """Built-in then plugin networks."""
    specs = dict(BUILTIN)
    for key, spec in plugin_networks().items():
        specs.setdefault(key, spec)
    return list(specs.values())


def resolve_network(network: str | Callable) -> NetworkSpec:
    """Find a network by name, by file path, or wrap a ``build_model`` callable.

    Raises:
        TrainingError: Unknown name, or a broken network file (message points at its line).
    """
    if callable(network):
        return NetworkSpec(getattr(network, "__name__", "custom"), network, "callable")
    text = str(network)
    if text.endswith(".py") or Path(text).expanduser().is_file():
        path = str(Path(text).expanduser().resolve())
        module = load_network_module(path)
        return NetworkSpec(
            path,
            module.build_model,
            "file",
            batch_size=int(getattr(module, "BATCH_SIZE", 32)),
            path=path,
            tasks=tuple(getattr(module, "TASKS", ())),
            defaults=dict(getattr(module, "DEFAULTS", {}) or {}),
        )
    key = text.lower()
    if key in BUILTIN:
        return BUILTIN[key]
    plugins = plugin_networks()
    if key in plugins:
        return plugins[key]
    names = ", ".join(sorted(set(BUILTIN) | set(plugins)))
    raise TrainingError(
        f'Unknown network "{text}": use one of {names}, or the path of a .py file '
        "defining build_model(input_shape, num_outputs, **params)."
    )


# -- the rules every door checks (CLI, Python API, web form, REST API) -------------------

#: The custom-network contract, stated once for every message.
BUILD_MODEL_SIGNATURE = "build_model(input_shape, num_outputs, **params)"


def custom_code_problem(code: str) -> str | None:
    """The message for custom network code that does not define ``build_model``, else ``None``."""
    return None if "def build_model" in (code or "") else f"Custom code must define {BUILD_MODEL_SIGNATURE}."


def network_task_problem(spec: NetworkSpec, task: str | None, dataset_id: str) -> str | None:
    """The message when ``spec`` is declared for other tasks than the dataset's ``task``, else ``None``.

    A network that declares no tasks (a custom file without ``TASKS``, a
    callable) passes: its output shape is checked when the model is built.
    """
    tasks = tuple(spec.tasks or ())
    if not task or not tasks or task in tasks:
        return None
    fits = sorted(s.name.lower() for s in list_networks() if task in (s.tasks or ()))
    return (
        f'Network "{spec.name}" is for {" / ".join(tasks)}; dataset {dataset_id} is a {task} '
        f"dataset: choose {', '.join(fits) or 'custom code'}."
    )


def check_network_task(spec: NetworkSpec, task: str | None, dataset_id: str) -> None:
    """Refuse a network whose declared tasks do not include the dataset's (before any job exists).

    Raises:
        FormValidationError: On field ``network``, naming the networks that fit.
    """
    problem = network_task_problem(spec, task, dataset_id)
    if problem:
        raise FormValidationError({"network": [problem]}, "training options")


def check_network_input(spec: NetworkSpec, feature_shape, crop_size: int | None, params: dict) -> None:
    """Refuse images smaller than a network's declared ``min_size`` (before any job folder exists).

    A network with a minimum resizes in its graph when given the network parameter ``input_size``
    (the convention of the backbones plugin); then that size is checked instead.

    Raises:
        FormValidationError: On field ``network``, naming the minimum and both ways out.
    """
    if not spec.min_size:
        return
    wanted = params.get("input_size")
    height, width = (int(crop_size), int(crop_size)) if crop_size else (int(feature_shape[0]), int(feature_shape[1]))
    size = int(wanted) if wanted else min(height, width)
    if size < spec.min_size:
        given = f"input_size {size}" if wanted else f"the images are {height}x{width}"
        raise FormValidationError(
            {
                "network": [
                    f"{spec.name} needs inputs of at least {spec.min_size}x{spec.min_size} pixels; {given}: resize "
                    f"the dataset, or let the network resize them with --network-param input_size={spec.min_size}"
                ]
            },
            "training options",
        )


# -- which networks a dataset's kind takes: one rule for the form, the APIs and the CLI (metadata only) ----------

#: The kind of a 3-D dataset (``dataset.json`` ``"layout": "DHWC"``); a 2-D dataset's kind is its task's name.
VOLUME_KIND = "volume"


def _volume_names() -> tuple[str, ...]:
    from ..volume_nets import VOLUME_NETWORKS  # names only: Keras loads when a volume network is built

    return VOLUME_NETWORKS


def networks_for_kind(kind: str | None) -> list[str]:
    """The networks a dataset of ``kind`` takes, by name: the volume networks for ``"volume"``, else the
    2-D networks declared for that task (or declaring none); ``None``: every 2-D network."""
    if kind == VOLUME_KIND:
        return list(_volume_names())
    return [s.name for s in list_networks() if not kind or not s.tasks or kind in s.tasks]


def default_network_for(kind: str | None) -> str | None:
    """The network preselected for a dataset of ``kind`` (``unet3d`` for volumes), or ``None``."""
    return _volume_names()[0] if kind == VOLUME_KIND else DEFAULT_NETWORK.get(kind or "")


def network_kind_problem(network: str, kind: str | None, dataset_id: str) -> str | None:
    """The message when ``network`` cannot train on a dataset of ``kind``, else ``None``.

    Volume networks take only volume datasets and volume datasets only volume networks;
    a 2-D network's tasks are checked by :func:`network_task_problem`.
    """
    volume_net = str(network).lower() in _volume_names()
    if volume_net == (kind == VOLUME_KIND):
        return None
    fits = networks_for_kind(kind)
    what = "a volume (3-D)" if kind == VOLUME_KIND else (f"a {kind}" if kind else "a 2-D image")
    net = "a volume network" if volume_net else "not a volume network"
    return (
        f'network "{network}" is {net} and dataset {dataset_id} is {what} dataset: '
        f"choose {' or '.join(fits) if fits else 'custom code'}."
    )


def check_network_kind(network: Any, kind: str | None, dataset_id: str) -> None:
    """Refuse a network that cannot train on a dataset of ``kind`` (before any job exists).

    Raises:
        FormValidationError: On field ``network``, naming the dataset's kind and the networks that fit.
    """
    problem = network_kind_problem(network, kind, dataset_id) if isinstance(network, str) and network else None
    if problem:
        raise FormValidationError({"network": [problem]}, "training options")
