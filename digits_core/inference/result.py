"""What :func:`~digits_core.inference.infer` returns: the samples, metrics and the lazily rendered view.

The view runs the first time the HTML or JSON is asked for, so an API call
that only needs predictions pays for the network alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

import numpy as np

from ..errors import InferenceError
from .model import InferenceModel


@dataclass
class InferenceSample:
    """One input and what the network made of it.

    Attributes:
        input_id: The input's name.
        input_data: The raw feature the network saw (centre-cropped like
            the network input), in the dataset's dtype.
        output: The network's output for it (numpy).
        ground_truth: The known label (class index, ``H×W`` mask, numbers) or ``None``.
        top: For classification, the top-N ``[{index, label, probability}]``.
        detections: For detection, ``[{class, class_id, score, box}]`` in the *input image's*
            pixels, best first (see :mod:`digits_core.inference.detection`).
        labels: For multi-label classification, the labels at or above their tuned threshold,
            ``[{index, label, probability, threshold}]``, best first (see :mod:`digits_core.inference.multilabel`).
    """

    input_id: str
    input_data: np.ndarray
    output: np.ndarray
    ground_truth: Any = None
    top: list | None = None
    detections: list | None = None
    labels: list | None = None

    def to_dict(self) -> dict:
        """JSON-friendly summary (no arrays except small outputs)."""
        data: dict[str, Any] = {"input_id": self.input_id}
        if self.labels is not None:
            data["labels"] = self.labels
        if self.top is not None:
            data["top"] = self.top
        elif self.detections is not None:
            data["detections"] = self.detections
        elif self.output.size <= 64:
            data["output"] = self.output.tolist()
        else:
            data["output_shape"] = list(self.output.shape)
        truth = self.ground_truth
        if truth is not None:
            data["ground_truth"] = (
                truth.tolist()
                if isinstance(truth, np.ndarray) and truth.size <= 64
                else ("mask" if isinstance(truth, np.ndarray) else truth)
            )
        return data


class SampleList(Sequence[InferenceSample]):
    """The samples of a result, each built the first time it is read.

    A list-like sequence (``len``, indexing, slicing, iteration) over the
    arrays :func:`~digits_core.inference.infer` produced: a caller that only
    wants the outputs (:attr:`InferenceResult.outputs`) or one sample does
    not pay for building a Python object, a cropped input view and a top-N
    list for every input of a batch. A sample, once built, is kept: changes
    to it (a view's or plugin's annotations) stay.

    Args:
        ids: The input names, in order.
        features: The raw inputs ``[N, ...]`` as the network got them.
        outputs: The network outputs ``[N, ...]``.
        labels: The ground truths, one per input, or ``None`` when no input has one.
        network_input: Makes a raw feature into what the network saw (its centre crop).
        crop_label: Crops a label like the input.
        top: ``top(i)``, the top-N list of sample ``i`` (classification), or ``None``.
    """

    def __init__(
        self,
        ids: Sequence[str],
        features: np.ndarray,
        outputs: np.ndarray,
        labels: Sequence[Any] | None = None,
        *,
        network_input: Callable[[np.ndarray], np.ndarray] = lambda feature: feature,
        crop_label: Callable[[Any], Any] = lambda label: label,
        top: Callable[[int], list | None] | None = None,
    ) -> None:
        self.ids = ids
        self.features = features
        self.outputs = outputs
        self._labels = labels
        self._network_input = network_input
        self._crop_label = crop_label
        self._top = top
        self._built: list[InferenceSample | None] = [None] * len(ids)

    def __len__(self) -> int:
        return len(self._built)

    @overload
    def __getitem__(self, index: int) -> InferenceSample: ...

    @overload
    def __getitem__(self, index: slice) -> list[InferenceSample]: ...

    def __getitem__(self, index: int | slice) -> InferenceSample | list[InferenceSample]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        index = range(len(self))[index]  # negative indices; IndexError past the end
        sample = self._built[index]
        if sample is None:
            label = None if self._labels is None else self._crop_label(self._labels[index])
            sample = self._built[index] = InferenceSample(
                self.ids[index],
                self._network_input(self.features[index]),
                self.outputs[index],
                label,
                self._top(index) if self._top else None,
            )
        return sample

    def __repr__(self) -> str:
        return f"SampleList({len(self)} samples)"


@dataclass
class InferenceResult:
    """What :func:`~digits_core.inference.infer` returns.

    Attributes:
        model: The :class:`~digits_core.inference.model.InferenceModel` used.
        samples: One :class:`InferenceSample` per input, in input order: a
            list, or a :class:`SampleList` that builds each sample when it is read.
        metrics: Classification figures over the labelled inputs (see
            :func:`~digits_core.inference.metrics.classification_metrics`), or ``None``.
        view_id: The view that renders the results (``None``: no view for this task).
        view_config: The validated view options.
        errors: The inputs that were skipped, as ``{"input": name, "error": message}``.
        notes: One-line messages from the data plugin after inference (e.g.
            where a PACS source stored the results; see
            :meth:`~digits_core.interfaces.DataIngestion.finish_inference`).
    """

    model: InferenceModel
    samples: Sequence[InferenceSample]
    metrics: dict | None = None
    view_id: str | None = None
    view_config: dict = field(default_factory=dict)
    errors: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _rendered: Any = field(default=None, repr=False)

    @property
    def outputs(self) -> np.ndarray:
        """All outputs stacked ``[N, ...]``."""
        if isinstance(self.samples, SampleList):
            return self.samples.outputs
        return np.stack([s.output for s in self.samples]) if self.samples else np.zeros((0,))

    def run_view(self) -> tuple[Any, Any]:
        """Create the view and process every sample (once); return ``(view, processed)``.

        Raises:
            InferenceError: No view for this model's task and none chosen.
            PluginError: The view failed.
        """
        if self._rendered is None:
            if not self.view_id:
                raise InferenceError(
                    f'No view renders "{self.model.task}" models by default; choose one with '
                    "--view (see `digits plugins`)."
                )
            from ..plugins.contract import create_view
            from ..plugins.registry import registry
            from .report import run_view

            view_class = registry.get_view(self.view_id)
            view = create_view(view_class, self.model.dataset, self.view_config, self.model.view_context())
            processed = run_view(view, ((s.input_id, s.input_data, s.output, s.ground_truth) for s in self.samples))
            self._rendered = (view, processed)
        return self._rendered

    def page_info(self) -> dict:
        """The key/value pairs listed under the page title."""
        info = {
            "Model": f"{self.model.job.name} ({self.model.id})",
            "Epoch": self.model.epoch,
            "Task": self.model.task,
            "Inputs": len(self.samples),
        }
        if self.model.dataset.id:
            info["Dataset"] = self.model.dataset.id
        if self.metrics:
            info["Top-1 accuracy"] = f"{self.metrics['top1_accuracy'] * 100:.2f}%"
        if self.errors:
            first = self.errors[0]
            info["Skipped inputs"] = f"{len(self.errors)} (first: {first['input']}: {first['error']})" + (
                "; see the JSON output for all" if len(self.errors) > 1 else ""
            )
        return info

    def to_html(self, title: str | None = None) -> str:
        """Render the self-contained HTML results page."""
        from .report import render_html

        view, processed = self.run_view()
        return render_html(
            view, processed, title=title or f"Inference: {self.model.job.name or self.model.id}", info=self.page_info()
        )

    def save_html(self, path: str | os.PathLike, title: str | None = None) -> Path:
        """Write :meth:`to_html` to ``path`` (atomically) and return the path."""
        path = Path(path)
        text = self.to_html(title)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
        return path

    def to_json(self, *, include_images: bool = False, include_view: bool = True) -> dict:
        """Return the results as JSON-serializable data.

        Args:
            include_images: Keep the view's PNG data URIs.
            include_view: Run the view and add its per-sample data and header/summary contexts.
        """
        from .report import report_json, to_jsonable

        data: dict[str, Any] = {
            "model": self.model.describe(),
            "samples": [s.to_dict() for s in self.samples],
            "metrics": self.metrics,
            "view": self.view_id,
            "errors": list(self.errors),
            "notes": list(self.notes),
        }
        if include_view and self.view_id:
            view, processed = self.run_view()
            report = report_json(view, processed, include_images=include_images)
            for sample, view_sample in zip(data["samples"], report["samples"]):
                sample["view"] = view_sample["data"]
            data["view_header"] = report["header"]
            data["view_summary"] = report["summary"]
        return to_jsonable(data, include_images=True)
