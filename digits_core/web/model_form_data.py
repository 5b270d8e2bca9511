"""What the New Model page fills in besides the option fields: the tasks its menus filter by, a clone's values."""

from __future__ import annotations

import json

from ..engine.option_specs import BY_NAME
from ..errors import DigitsError
from ..jobs import Job, JobStatus
from ..submit.models import CUSTOM_NETWORK_FILE, dataset_kind, dataset_task  # noqa: F401 - read from here by the pages
from .helpers import read_json
from .model_form import CUSTOM, ModelForm, show_defaults
from .zoo_views import zoo_rows


def network_menu_data(store) -> dict:
    """For the New Model page's script: each network's dataset kinds, each Done dataset's kind and each trained
    model's task.

    A dataset's kind is its task, or ``"volume"`` for a 3-D one (:func:`digits_core.submit.models.dataset_kind`);
    the kinds of a network come from :func:`digits_core.engine.networks.networks_for_kind`, the rule the
    submission layer refuses by, so the menu offers what a Create accepts.
    """
    from ..engine.networks import VOLUME_KIND, networks_for_kind
    from ..engine.tasks import TASKS

    kinds = [*TASKS, VOLUME_KIND]
    network_kinds: dict[str, list[str]] = {CUSTOM: [k for k in kinds if k != VOLUME_KIND]}
    for kind in kinds:
        for name in networks_for_kind(kind):
            network_kinds.setdefault(name, []).append(kind)
    models = [j for j in store.list("model") if (j.path / "snapshots").is_dir()]
    datasets = [j for j in store.list("dataset") if j.status is JobStatus.DONE]
    return {
        "network_tasks": network_kinds,
        "dataset_tasks": {j.id: dataset_kind(j) for j in datasets},
        "model_tasks": {j.id: (read_json(j.path / "model.json") or {}).get("task") for j in models},
        **backbone_menu_data(datasets),
    }


def _image_size(ds: Job) -> list[int] | None:
    """A 2-D dataset's stored height and width (``dataset.json`` ``feature.shape``), or ``None``."""
    feature = (read_json(ds.path / "dataset" / "dataset.json") or {}).get("feature")
    shape = feature.get("shape") if isinstance(feature, dict) else None
    if isinstance(shape, list) and len(shape) in (2, 3) and all(isinstance(v, int) for v in shape):
        return shape[:2]
    return None


def backbone_menu_data(datasets: list[Job]) -> dict:
    """For the New Model page's script: each network's declared minimum input size and weights, each Done
    dataset's image size, and the zoo's entries (the weights picker's ``zoo:NAME`` choices).

    The rule the page applies is the engine's (:func:`digits_core.engine.networks.check_network_input`,
    also run by the submission layer): a network whose ``min_size`` exceeds the dataset's images (or
    ``crop_size``) is disabled with the reason, unless the network parameter ``input_size`` resizes in the graph.
    """
    from ..engine.networks import list_networks  # the registry's metadata, per page (as networks_for_kind above)

    specs = list_networks()
    rows, _ = zoo_rows()
    return {
        "network_min_size": {s.name: s.min_size for s in specs if s.min_size},
        "network_weights": {s.name: sorted(s.weights) for s in specs if s.weights},
        "dataset_sizes": {j.id: size for j in datasets if (size := _image_size(j))},
        "zoo": [{"name": r["weights"], "network": r["network"], "task": r["task"]} for r in rows],
    }


def preselect_network(form: ModelForm, store) -> None:
    """Choose the default network of the form's dataset's kind, and say so when no named network fits it."""
    from ..engine.networks import default_network_for, networks_for_kind

    dataset_id = form.dataset.data or next((value for value, _ in form.dataset.choices or [] if value), None)
    if not dataset_id:
        return
    try:
        kind = dataset_kind(store.get(dataset_id, kind="dataset"))
    except DigitsError:
        return  # a dataset that is gone: the dataset field says so
    fits = networks_for_kind(kind)
    form.network.data = default_network_for(kind) or (fits[0] if fits else CUSTOM)
    if not fits:
        form.network.description = (
            f"No built-in or plugin network is made for {f'{kind} datasets' if kind else 'this dataset'}: give your "
            "own network as Custom code (build_model returning the model and its loss), or install a plugin network."
        )


def fill_from_job(form: ModelForm, job: Job) -> None:
    """Fill the form with a model job's options (Clone); a dataset that is gone is named, not replaced."""
    # A job trained outside the server (`digits train`, the Python API) has no train_options: its
    # model.json holds the options it ran with (all of them, resolved), its network and dataset.
    info = read_json(job.path / "model.json") or {}
    resolved = dict(info.get("options") or {})
    for key, value in (resolved.pop("augmentation", None) or {}).items():  # the form's aug_* fields
        resolved.setdefault(f"aug_{key}", value)
    options = {**resolved, **(job.data.get("train_options") or {})}
    form.model_name.data = f"{job.name} (clone)"
    form.group.data = job.data.get("group")
    form.dataset.data = options.pop("dataset", job.data.get("dataset_id"))
    if form.dataset.data not in {value for value, _ in form.dataset.choices or []}:
        # Say so, rather than let the page pick another dataset (and a network for that one's task).
        missing = form.dataset.data
        form.dataset.choices = [("", "choose a dataset")] + [c for c in form.dataset.choices if c[0]]
        form.dataset.data = ""
        form.dataset.errors = [f"The source model's dataset {missing} was deleted (or is not Done): choose another."]
    pretrained = options.get("pretrained")
    if pretrained and pretrained not in {value for value, _ in form.pretrained.choices or []}:
        form.pretrained.choices = [*form.pretrained.choices, (pretrained, pretrained)]  # a file, or a deleted job
    network = options.pop("network", job.data.get("network"))
    if job.data.get("custom_network"):
        form.network.data = CUSTOM
        try:
            form.custom_network.data = (job.path / CUSTOM_NETWORK_FILE).read_text(encoding="utf-8")
        except OSError:
            pass
    else:
        form.network.data = network
    show_defaults(form)
    form.network_params.data = json.dumps(options.pop("network_params", {}) or {})
    for name, value in options.items():
        field = form._fields.get(name)
        if field is not None and value is not None:
            spec = BY_NAME.get(name)
            field.data = ("true" if value else "false") if spec is not None and spec.kind == "bool" else value
