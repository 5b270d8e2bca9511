"""The loop of one volume training run (see :mod:`~digits_core.engine.volume_train`): steps, validation, saving."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ..datasets.volumes import VolumeStageReader
from ..errors import TrainingError
from ..jobs import JobStatus
from ..jobs.model import MODEL_FILE, read_model_record, write_model_record
from ..volumes.metrics import case_metrics, summarize
from ..volumes.patches import PatchSampler
from ..volumes.sliding import sliding_window
from . import jobio
from .volume_nets import build_unet, dice_ce_loss

MODEL_KERAS = "model.keras"


def slice_stacks(volume: np.ndarray, radius: int) -> np.ndarray:
    """``D×H×W×C`` → ``D×H×W×(2r+1)C``: each slice with ``radius`` neighbours per side as channels (edges repeated)."""
    padded = np.pad(volume, [(radius, radius), (0, 0), (0, 0), (0, 0)], mode="edge")
    stacks = [padded[offset : offset + volume.shape[0]] for offset in range(2 * radius + 1)]
    return np.concatenate(stacks, axis=-1)


def predict_volume(
    model,
    volume: np.ndarray,
    network: str,
    patch,
    num_classes: int,
    *,
    overlap: float = 0.5,
    adjacent: int = 2,
    unit: int = 4,
) -> np.ndarray:
    """Class probabilities ``D×H×W×K`` of a whole normalised volume with a trained volume network."""

    def predict(batch: np.ndarray) -> np.ndarray:
        return np.asarray(model.predict_on_batch(batch.astype(np.float32)))

    if network == "unet3d":
        return sliding_window(volume, patch, predict, num_classes, overlap=overlap)
    stacks = slice_stacks(volume, adjacent)
    pad = [(0, 0), (0, -stacks.shape[1] % unit), (0, -stacks.shape[2] % unit), (0, 0)]
    stacks = np.pad(stacks, pad, mode="edge")
    probs = np.concatenate([predict(stacks[i : i + 8]) for i in range(0, len(stacks), 8)])
    return probs[:, : volume.shape[1], : volume.shape[2]]


class VolumeRun:
    """One run: build the network, train on sampled patches, validate on whole cases, save."""

    def __init__(
        self,
        job_folder: Path,
        dataset_folder: Path,
        info: dict,
        config,
        progress: Callable | None,
        tracker=None,
        start: Path | None = None,
    ):
        self.folder = Path(job_folder)
        self.tracker = tracker  # the MLflow run (engine.mlflow_log.RunTracker), or None
        self.dataset_folder = Path(dataset_folder)
        self.info = info
        self.config = config
        self.progress = progress
        self.num_classes = int(info.get("num_classes") or 2)
        self.channels = int(info["feature"]["shape"][3])
        self.val_cases: list[dict] = []
        self.start = start  # a .keras model whose weights the network starts from (``pretrained``), or None

    def _batch(self, sampler: PatchSampler):
        x, y = sampler.batch(self.config.batch_size)
        if self.config.network == "unet2.5d":  # D = 2r+1 slices become channels; the middle slice is labelled
            r = self.config.adjacent_slices
            x = np.concatenate([x[:, i] for i in range(x.shape[1])], axis=-1)
            y = y[:, r]
        return x, y

    def run(self) -> JobStatus:
        import keras

        config = self.config
        keras.utils.set_random_seed(config.seed)
        counts = {s: v["count"] for s, v in self.info["stages"].items()}
        train = VolumeStageReader(self.dataset_folder / "train")
        val = VolumeStageReader(self.dataset_folder / "val") if counts.get("val") else None
        patch = list(config.patch)
        if config.network == "unet2.5d":
            patch[0] = 2 * config.adjacent_slices + 1
        sampler = PatchSampler(train, counts["train"], patch, foreground=config.foreground, seed=config.seed)
        dims = 3 if config.network == "unet3d" else 2
        channels = self.channels * (1 if dims == 3 else 2 * config.adjacent_slices + 1)
        model = build_unet(
            channels, self.num_classes, dims=dims, base_filters=config.base_filters, levels=config.levels
        )
        if self.start is not None:
            self._load_start(keras, model, self.start)
        model.compile(optimizer=keras.optimizers.Adam(config.learning_rate), loss=dice_ce_loss(self.num_classes))
        self._write_info(model, counts, "Running")
        if self.tracker is not None:
            self.tracker.begin()
        writer = jobio.MetricsWriter(self.folder, tensorboard=False)
        total = config.epochs * config.steps_per_epoch
        step, started, status = 0, time.perf_counter(), JobStatus.DONE
        try:
            for epoch in range(1, config.epochs + 1):
                losses = []
                for _ in range(config.steps_per_epoch):
                    if (self.folder / jobio.ABORT_FILE).exists():
                        return JobStatus.ABORTED
                    x, y = self._batch(sampler)
                    losses.append(float(model.train_on_batch(x, y)))
                    step += 1
                    self._report(
                        epoch - 1 + (step % config.steps_per_epoch or config.steps_per_epoch) / config.steps_per_epoch,
                        step,
                        total,
                        losses[-1],
                        started,
                        "train",
                    )
                if not np.isfinite(losses).all():
                    raise ValueError(f"the loss became NaN or infinite in epoch {epoch}")
                writer.write(epoch, step, {"loss": float(np.mean(losses))})
                scores = {}
                if val is not None and (epoch % config.val_every == 0 or epoch == config.epochs):
                    scores = self.validate(model, val, counts["val"])
                    writer.write(epoch, step, scores)
                    self._report(epoch, step, total, float(np.mean(losses)), started, "val", scores)
                if self.tracker is not None:
                    self.tracker.epoch(epoch, {"loss": float(np.mean(losses)), **scores})
            model.save(self.folder / MODEL_KERAS)
            self._write_info(model, counts, status.value)
        finally:
            writer.close()
            train.close()
            if val is not None:
                val.close()
        return status

    def _load_start(self, keras, model, start: Path) -> None:
        """Start from the ``pretrained`` model's weights; a network of other layers is refused naming both."""
        source = keras.models.load_model(start, compile=False)
        have = [tuple(w.shape) for w in source.get_weights()]
        want = [tuple(w.shape) for w in model.get_weights()]
        if have != want:
            raise TrainingError(
                f"pretrained {start.parent.name}: its network has other layers than this "
                f"{self.config.network} (base filters {self.config.base_filters}, levels {self.config.levels}, "
                f"{model.input_shape[-1]} input channels); give the same network settings"
            )
        model.set_weights(source.get_weights())

    def validate(self, model, reader: VolumeStageReader, count: int) -> dict[str, float]:
        """Sliding-window inference over every validation case; the per-case scores' means."""
        self.val_cases = []
        for index in range(count):
            volume, label = reader.case(index)
            probs = predict_volume(
                model,
                volume.array.astype(np.float32),
                self.config.network,
                self.config.patch,
                self.num_classes,
                overlap=self.config.overlap,
                adjacent=self.config.adjacent_slices,
                unit=2 ** (self.config.levels - 1),
            )
            scores = case_metrics(np.argmax(probs, axis=-1), label, self.num_classes, volume.spacing)
            self.val_cases.append({"case": volume.name, **scores})
        return summarize(self.val_cases)

    def _report(
        self, epoch: float, step: int, total: int, loss: float, started: float, phase: str, extra: dict | None = None
    ) -> None:
        if self.progress is None:
            return
        spent = time.perf_counter() - started
        event = {
            "epoch": epoch,
            "epochs": self.config.epochs,
            "step": step,
            "total_steps": total,
            "loss": loss,
            "eta_s": spent / max(step, 1) * (total - step),
            "phase": phase,
            **(extra or {}),
        }
        self.progress(event)

    def _write_info(self, model, counts: dict, status: str) -> None:
        userdata = self.info.get("userdata", {})
        tracked = read_model_record(self.folder).get("mlflow") if (self.folder / MODEL_FILE).is_file() else None
        write_model_record(
            self.folder,
            {
                **({"mlflow": tracked} if tracked else {}),  # the run's MLflow record (RunTracker.begin) is kept
                "kind": "volume",
                "job_id": self.folder.name,
                "network": self.config.network,
                "network_source": "builtin",
                "dataset_id": self.info["id"],
                "dataset_path": str(self.dataset_folder),
                "dataset_plugin": self.info.get("plugin_id"),
                "task": "volume-segmentation",
                "volume": asdict(self.config),
                "num_outputs": self.num_classes,
                "input_channels": self.channels,
                "class_labels": self.info.get("class_labels"),
                "color_palette": self.info.get("color_palette"),
                "target_spacing_mm": userdata.get("target_spacing_mm"),
                "normalization": userdata.get("normalization_used"),
                "parameters": int(model.count_params()),
                "train_count": counts.get("train", 0),
                "val_count": counts.get("val", 0),
                "val_cases": self.val_cases,
                "status": status,
                "model_file": MODEL_KERAS,
                **({"pretrained": str(self.start)} if self.start is not None else {}),
            },
        )
