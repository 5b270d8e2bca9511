"""A round on a folder pool of ``.npy`` volumes retrains the volume model on the accepted labels (issue 46).

Real parts: a ``nifti-volumes`` dataset and a tiny ``unet3d`` run (real TensorFlow), a folder pool of ``.npy``
volumes with labels accepted as a reviewer stores them, then :func:`~digits_core.labeling.run_round`.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = pytest.mark.slow

SHAPE = (8, 16, 16)
#: A tiny unet3d: a short run is what these checks need (the pieces work, not a figure).
TINY = {
    "epochs": 1,
    "batch_size": 2,
    "volume_steps_per_epoch": 2,
    "volume_base_filters": 4,
    "volume_levels": 2,
    "volume_patch": "8,16,16",
}


def _case(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A noisy volume with one bright box, and the box as its label."""
    volume = rng.normal(0.0, 0.3, SHAPE).astype(np.float32)
    label = np.zeros(SHAPE, np.uint8)
    d, h, w = rng.integers(0, 4), rng.integers(0, 8), rng.integers(0, 8)
    label[d : d + 4, h : h + 7, w : w + 7] = 1
    volume[label == 1] += 2.0
    return volume, label


def _weights(model_folder) -> list[np.ndarray]:
    import keras

    return keras.models.load_model(model_folder / "model.keras", compile=False).get_weights()


def _folder_pool(root, jobs, name: str, count: int, seed: int):
    """A folder pool of ``count`` new ``.npy`` volumes under ``root/name``: ``(pool, file name -> label)``."""
    from digits_core.labeling import create_pool

    rng = np.random.default_rng(seed)
    data = root / name
    data.mkdir()
    truth = {}
    for i in range(count):
        volume, label = _case(rng)
        np.save(data / f"v{i}.npy", volume)
        truth[f"v{i}.npy"] = label
    pool = create_pool(
        name,
        {"kind": "folder", "root": str(data)},
        [{"path": p} for p in sorted(truth)],
        dimensions=3,
        class_labels=["background", "box"],
        jobs_dir=jobs,
    )
    return pool, truth


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A ``nifti-volumes`` dataset of 4 cases and a one-epoch unet3d on it: ``(jobs folder, model job)``."""
    import nibabel

    from digits_core.datasets import create_dataset
    from digits_core.engine import train

    root = tmp_path_factory.mktemp("volume-rounds")
    rng = np.random.default_rng(0)
    (root / "images").mkdir()
    (root / "labels").mkdir()
    for i in range(4):
        volume, label = _case(rng)
        for folder, array in (("images", volume), ("labels", label)):
            nibabel.save(nibabel.Nifti1Image(np.transpose(array, (2, 1, 0)), np.eye(4)), root / folder / f"c{i}.nii.gz")
    jobs = root / "jobs"
    form = {"image_folder": str(root / "images"), "label_folder": str(root / "labels"), "pct_val": 50}
    dataset = create_dataset("nifti-volumes", form, name="base", workers=1, jobs_dir=jobs)
    model = train(dataset.id, "unet3d", name="base", jobs_dir=jobs, **TINY)
    return root, jobs, model


def test_a_round_on_a_folder_pool_of_volumes_retrains_from_the_model_on_the_accepted_labels(base):
    from digits_core.datasets.volumes import VolumeStageReader
    from digits_core.engine.volume_train import volume_dataset_folder
    from digits_core.jobs import JobStore
    from digits_core.labeling import load_pool, run_round
    from digits_core.labeling.masks import encode_mask

    root, jobs, model = base
    pool, truth = _folder_pool(root, jobs, "vols", 5, seed=7)
    accepted = {}
    for cand in pool.candidates()[:4]:
        label = truth[cand["source"]["path"]]
        wrong = np.zeros(SHAPE, np.uint8)  # a proposal that is not the label: it must not be trained on
        wrong[:, :2, :2] = 1
        (pool.path / "proposals" / f"{cand['id']}.npy").write_bytes(encode_mask(wrong))
        pool.record_proposal(cand["id"], {"file": f"proposals/{cand['id']}.npy", "model_id": model.id})
        pool.store_label(cand["id"], label, user="ann", base_version=0)
        accepted[cand["id"]] = label

    result = run_round(pool, model.id, strategy="entropy", count=1, epochs=1, val_percent=50, jobs_dir=jobs)

    # the unlabelled volume was scored and proposed (a .npy on the volume's voxels)
    (open_one,) = [c for c in load_pool(pool.id, jobs).candidates() if c["id"] not in accepted]
    assert result.proposed == [open_one["id"]] and result.scored == 1
    proposal = np.load(pool.path / open_one["proposal"]["file"])
    assert proposal.shape == SHAPE and set(np.unique(proposal)) <= {0, 1}

    # a new volume model, started from the old one's weights (recorded), whose weights moved
    assert result.new_model_id and result.new_model_id != model.id
    new = JobStore(jobs).get(result.new_model_id)
    info = json.loads((new.path / "model.json").read_text())
    assert info["kind"] == "volume" and info["network"] == "unet3d"
    assert info["pretrained"] == str(model.path / "model.keras")
    assert info["volume"]["base_filters"] == 4 and info["volume"]["levels"] == 2  # the model's settings carried
    old, now = _weights(model.path), _weights(new.path)
    assert [w.shape for w in old] == [w.shape for w in now]
    assert any(not np.array_equal(a, b) for a, b in zip(old, now))

    # the round's dataset is the accepted labels on the .npy voxels (never the proposals)
    folder = volume_dataset_folder(result.dataset_id, jobs)
    published = json.loads((folder / "dataset.json").read_text())
    seen = {}
    for stage in ("train", "val"):
        reader = VolumeStageReader(folder / stage)
        try:
            for index in range(published["stages"][stage]["count"]):
                volume, label = reader.case(index)
                seen[volume.name] = label
        finally:
            reader.close()
    assert sorted(seen) == sorted(accepted)
    for cid, label in seen.items():
        np.testing.assert_array_equal(label, accepted[cid], err_msg=cid)

    # the round's record: the new model and its validation Dice (the run's last val_dice)
    (entry,) = load_pool(pool.id, jobs).record()["rounds"]
    logged = [json.loads(line) for line in (new.path / "metrics.jsonl").read_text().splitlines()]
    dice = [p["value"] for p in logged if p["name"] == "val_dice"]
    assert entry["new_model_id"] == result.new_model_id and entry["dataset_id"] == result.dataset_id
    assert isinstance(entry["val_dice"], float) and entry["val_dice"] == pytest.approx(dice[-1])
    assert entry["val_dice"] == pytest.approx(np.mean([c["dice"] for c in info["val_cases"]]))


def test_a_volume_run_starts_from_the_pretrained_models_weights(base):
    """With a learning rate of 1e-9 the run's weights stay the pretrained model's (Adam moves each by about the
    rate a step): they were loaded, not drawn afresh; a name that is no volume model is refused on the field."""
    from digits_core.engine import train
    from digits_core.errors import FormValidationError
    from digits_core.jobs import JobStore

    _, jobs, model = base
    again = train(
        model.model_record()["dataset_id"],
        "unet3d",
        jobs_dir=jobs,
        pretrained=model.id,
        **{**TINY, "learning_rate": 1e-9},
    )
    for a, b in zip(_weights(model.path), _weights(JobStore(jobs).get(again.id).path)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    with pytest.raises(FormValidationError, match="pretrained"):
        train(model.model_record()["dataset_id"], "unet3d", jobs_dir=jobs, pretrained="no-such-model", **TINY)


def test_a_round_with_a_unet25d_model_proposes_on_slice_stacks_and_retrains_a_unet25d(base):
    """The same loop with ``unet2.5d`` (slices with their neighbours as channels): the proposal covers the whole
    volume, and the round's model is again a unet2.5d with the model's context, started from its weights."""
    from digits_core.engine import train
    from digits_core.jobs import JobStore
    from digits_core.labeling import run_round

    root, jobs, model3d = base
    slices = {**TINY, "volume_patch": "1,16,16", "volume_adjacent_slices": 1}
    model = train(model3d.model_record()["dataset_id"], "unet2.5d", name="slices", jobs_dir=jobs, **slices)
    pool, truth = _folder_pool(root, jobs, "slices", 3, seed=11)
    for cand in pool.candidates()[:2]:
        pool.store_label(cand["id"], truth[cand["source"]["path"]], user="ann", base_version=0)

    result = run_round(pool, model.id, strategy="tta", count=1, epochs=1, val_percent=50, jobs_dir=jobs)

    (open_one,) = [c for c in pool.candidates() if c["state"] == "proposed"]
    assert result.proposed == [open_one["id"]]
    proposal = np.load(pool.path / open_one["proposal"]["file"])
    assert proposal.shape == SHAPE  # every slice segmented, not one stack
    new = JobStore(jobs).get(result.new_model_id)
    info = json.loads((new.path / "model.json").read_text())
    assert info["network"] == "unet2.5d" and info["pretrained"] == str(model.path / "model.keras")
    assert info["volume"]["adjacent_slices"] == 1
    old, now = _weights(model.path), _weights(new.path)
    assert [w.shape for w in old] == [w.shape for w in now]
    assert any(not np.array_equal(a, b) for a, b in zip(old, now))


def test_volume_scoring_honours_top_fraction(base):
    """A pool of volumes scored with ``top_fraction``: each volume's score is the reference formula over its voxel
    map (entropy of the model's probabilities; tta's variance over the volume and its in-plane flips, flipped back),
    1 the plain mean; the scoring says how it scored."""
    from labeling_support import top_fraction_reference as reference

    from digits_core.labeling import score_pool
    from digits_core.labeling.volume_scoring import VolumeModel

    root, jobs, model = base
    pool, _ = _folder_pool(root, jobs, "top", 2, seed=13)
    volumes = VolumeModel(pool, model.id, jobs)
    maps = {}
    for cand in pool.candidates():
        array = volumes.read(cand)[0].array
        probs = np.clip(np.asarray(volumes.probabilities(array), np.float64), 1e-12, 1.0)
        flipped = [np.flip(volumes.probabilities(np.ascontiguousarray(np.flip(array, a))), a) for a in (1, 2)]
        runs = np.stack([probs, *np.asarray(flipped, np.float64)])
        maps[cand["id"]] = (-(probs * np.log(probs)).sum(axis=-1), runs.var(axis=0).sum(axis=-1))

    for strategy, which in (("entropy", 0), ("tta", 1)):
        for fraction in (0.05, 1.0):
            result = score_pool(pool, model.id, strategy, top_fraction=fraction, jobs_dir=jobs)
            assert result.scored == 2 and result.top_fraction == fraction
            for cand in pool.candidates():
                voxel_map = maps[cand["id"]][which][None]
                want = reference(voxel_map, fraction)[0] if fraction < 1 else voxel_map.mean()
                assert cand["score"] == pytest.approx(want, rel=1e-4, abs=1e-9), (strategy, fraction)
    for entropy_map, tta_map in maps.values():  # the two aggregations apart, so the scores above tell them apart
        for voxel_map in (entropy_map, tta_map):
            assert reference(voxel_map[None], 0.05)[0] > 1.05 * voxel_map.mean()
