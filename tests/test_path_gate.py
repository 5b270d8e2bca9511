"""The one path gate for paths that come out of files (digits_core.paths.resolve_in_roots / open_in_roots).

Targets rows, list-file lines, KITTI label files paired by name and labels
named on inference list lines are all checked against the server's data
roots, with symlinks followed, and the message never tells an existing file
from a missing one or quotes what the file says.
"""

from __future__ import annotations

import json
import os
import re
from types import SimpleNamespace

import pytest

from digits_core.errors import InferenceError
from digits_core.paths import OutsideDataRootsError, confined_to, open_in_roots, resolve_in_roots

SECRET = "root:x:0:0:SECRET-LINE"
KITTI_LINE = "car 0 0 0 1 2 30 40 0 0 0 0 0 0 0\n"


@pytest.fixture
def world(tmp_path):
    """A data root with an image folder; a secret file outside it, and symlinks from inside to outside."""
    root = tmp_path / "data"
    images = root / "images"
    images.mkdir(parents=True)
    from PIL import Image

    for i in range(3):
        Image.new("L", (8, 8), 40 * i).save(images / f"{i}.png")
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "shadow").write_text(SECRET + "\n")
    (outside / "secret.png").write_bytes((images / "0.png").read_bytes())
    (outside / "label.txt").write_text(KITTI_LINE)
    (images / "link.png").symlink_to(outside / "secret.png")
    return SimpleNamespace(root=root, images=images, outside=outside)


def refusal(call, roots) -> str:
    with confined_to(roots), pytest.raises(ValueError) as exc:
        call()
    message = str(exc.value)
    assert "outside the server's data roots" in message and SECRET not in message
    return message


@pytest.mark.parametrize(
    "row_path",
    [
        "{outside}/secret.png",
        "../../private/secret.png",
        "link.png",
        "{outside}/shadow",
        "{outside}/nonexistent",
        "~/../../etc/shadow",
    ],
)
@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_targets_rows_outside_the_roots_are_refused(world, row_path, suffix):
    from digits_data_images.targets import read_targets

    path = row_path.format(outside=world.outside)
    targets = world.root / f"targets{suffix}"
    if suffix == ".csv":
        targets.write_text(f"path,y\n0.png,1\n{path},2\n")
    else:
        targets.write_text(json.dumps({"path": "0.png", "y": 1}) + "\n" + json.dumps({"path": path, "y": 2}) + "\n")
    message = refusal(lambda: read_targets(str(targets), str(world.images)), [world.root])
    assert message.startswith(f"{targets}:{3 if suffix == '.csv' else 2}:")  # the line, never the path written there
    assert path not in message
    # The command line (no server context) keeps reading any path.
    names, rows = read_targets(str(targets), str(world.images))
    assert names == ["y"] and len(rows) == 2


def test_an_existing_file_and_a_missing_one_get_the_same_message(world):
    """No existence oracle: /etc/shadow-like and /nonexistent rows read alike."""
    from digits_data_images.targets import read_targets

    messages = []
    for name in ("shadow", "nonexistent", "."):
        targets = world.root / "t.csv"
        targets.write_text(f"path,y\n{world.outside / name},2\n")
        messages.append(refusal(lambda: read_targets(str(targets), str(world.images)), [world.root]))
    assert len(set(messages)) == 1


def test_targets_rows_inside_the_roots_resolve_to_their_real_path(world):
    from digits_data_images.targets import read_targets

    (world.root / "alias").symlink_to(world.images, target_is_directory=True)
    targets = world.root / "t.csv"
    targets.write_text("path,y\n../alias/1.png,3\n")
    with confined_to([world.root]):
        _, rows = read_targets(str(targets), str(world.images))
    assert rows == [(str(world.images / "1.png"), (3.0,))]


def test_targets_rows_are_capped(world):
    from digits_data_images.targets import MAX_TARGETS, read_targets

    targets = world.root / "wide.csv"
    targets.write_text("path," + ",".join(f"t{i}" for i in range(MAX_TARGETS + 1)) + "\n")
    with pytest.raises(ValueError, match=f"at most {MAX_TARGETS}"):
        read_targets(str(targets))
    wide = world.root / "wide.jsonl"
    wide.write_text(json.dumps({"path": "0.png", "targets": [1.0] * (MAX_TARGETS + 1)}) + "\n")
    with pytest.raises(ValueError, match=f"at most {MAX_TARGETS}"):
        read_targets(str(wide))


def test_a_kitti_label_symlink_out_of_the_roots_is_refused_unread(world):
    from digits_data_images.detection_labels import pair_kitti

    labels = world.root / "labels"
    labels.mkdir()
    (labels / "0.txt").write_text(KITTI_LINE)
    (labels / "1.txt").symlink_to(world.outside / "label.txt")
    (labels / "2.txt").symlink_to(world.outside / "missing.txt")
    images = [str(world.images / f"{i}.png") for i in range(3)]
    message = refusal(lambda: pair_kitti(str(world.images), str(labels), images), [world.root])
    assert "1.txt" in message and "car" not in message
    os.remove(labels / "1.txt")
    same = refusal(lambda: pair_kitti(str(world.images), str(labels), images), [world.root])
    assert same.replace("2.txt", "1.txt") == message  # a dangling link reads like a live one
    os.remove(labels / "2.txt")
    with confined_to([world.root]):
        pairs, missing = pair_kitti(str(world.images), str(labels), images)
    assert pairs == [(images[0], str(labels / "0.txt"))] and missing == images[1:]


def test_the_kitti_reader_refuses_a_label_file_outside_the_roots(world):
    from digits_core import read_kitti_labels

    refusal(lambda: read_kitti_labels(str(world.outside / "label.txt"), {"car": 1}), [world.root])
    boxes = read_kitti_labels(str(world.outside / "label.txt"), {"car": 1})  # the CLI: any path
    assert boxes.tolist() == [[1.0, 1.0, 2.0, 30.0, 40.0]]


def test_a_kitti_file_with_too_many_objects_is_refused_as_it_is_read(world):
    from digits_core import read_kitti_labels
    from digits_core.boxes.kitti import MAX_OBJECTS_PER_IMAGE

    big = world.root / "big.txt"
    big.write_text(KITTI_LINE * (MAX_OBJECTS_PER_IMAGE + 1))
    with pytest.raises(ValueError, match=f"more than {MAX_OBJECTS_PER_IMAGE} objects"):
        read_kitti_labels(str(big), {})


def test_inference_ground_truth_label_outside_the_roots_is_refused(world):
    """`img.png /outside/label.txt` on a detection inference list line."""
    from digits_core.inference.detection import ground_truth_boxes

    model = SimpleNamespace(
        class_labels=["dontcare", "car"], feature_shape=(8, 8, 1), dataset=SimpleNamespace(resize_mode="squash")
    )
    item = SimpleNamespace(path=world.images / "0.png", array=None, base=world.root)
    for label in (str(world.outside / "label.txt"), "../private/label.txt", str(world.outside / "nope.txt")):
        with confined_to([world.root]), pytest.raises(InferenceError, match="outside the server's data roots") as exc:
            ground_truth_boxes(model, item, label, "line 1")
        assert "car" not in str(exc.value) and label not in str(exc.value)


def test_list_file_lines_go_through_the_gate(world):
    from digits_data_images import listing

    listed = world.root / "list.txt"
    listed.write_text("images/0.png 0\nimages/link.png 1\n")
    message = refusal(lambda: listing.read_list_file(str(listed)), [world.root])
    assert "line 2" in message
    paths = world.root / "paths.txt"
    paths.write_text("images/0.png\n../private/nothing.png\n")
    assert "line 2" in refusal(lambda: listing.read_path_list(str(paths)), [world.root])


def test_open_in_roots_opens_the_checked_file_and_only_for_reading(world):
    with confined_to([world.root]):
        with open_in_roots("images/0.png", base=world.root) as handle:
            assert handle.read(8) == b"\x89PNG\r\n\x1a\n"
        with pytest.raises(OutsideDataRootsError):
            open_in_roots(world.images / "link.png")
        with pytest.raises(ValueError, match="reads only"):
            open_in_roots(world.root / "new.txt", "w")
    for bad in ("", "   ", "a\x00b"):
        with pytest.raises(OutsideDataRootsError):
            resolve_in_roots(bad, where="x.csv line 1")


def test_the_cli_confines_when_given_data_roots(world, tmp_path, capsys):
    """`digits dataset create --data-root DIR` reads as the web server does; without it, as before."""
    from digits_core.cli import main

    targets = world.root / "t.csv"
    targets.write_text("path,y\n0.png,1\n1.png,2\n2.png,3\nlink.png,4\n")
    args = [
        "--jobs-dir",
        str(tmp_path / "jobs"),
        "dataset",
        "create",
        "image-regression",
        "--name",
        "r",
        "--image-folder",
        str(world.images),
        "--targets-file",
        str(targets),
        "--width",
        "8",
        "--height",
        "8",
        "--quiet",
    ]
    assert main([*args, "--data-root", str(world.root)]) != 0
    assert "outside the server's data roots" in capsys.readouterr().err
    assert main(args) == 0


def test_plugin_check_warns_about_a_plugin_that_reads_past_the_gate(tmp_path):
    """`digits plugin check --data-root`: a plugin opening list-file paths itself is named with the path it read."""
    import numpy as np
    from wtforms import Form, StringField

    from digits_core import DataIngestion
    from digits_core.paths import open_in_roots, resolve_in_roots
    from digits_core.plugins.testing import check_plugin

    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("7\n")
    (root / "inside.txt").write_text("3\n")
    (root / "list.txt").write_text("inside.txt\n../outside/secret.txt\n")

    class ListForm(Form):
        list_file = StringField("List", default=str(root / "list.txt"))

    class Ungated(DataIngestion):
        plugin_id = "ungated-list"

        @staticmethod
        def get_dataset_form():
            return ListForm

        @staticmethod
        def get_dataset_template(form):
            return "{{ form.list_file }}", {}

        def _paths(self):
            base = os.path.dirname(self.list_file)
            with open(self.list_file) as handle:
                return [os.path.join(base, line.strip()) for line in handle if line.strip()]

        def itemize_entries(self, stage):
            return self._paths() if stage == "train" else []

        def encode_entry(self, entry):
            with open(entry) as handle:
                return np.full((2, 2, 1), int(handle.read()), np.uint8), 0

    class Gated(Ungated):
        plugin_id = "gated-list"

        def _paths(self):
            with open_in_roots(self.list_file, "r") as handle:
                return [str(resolve_in_roots(line.strip(), base=root)) for line in handle if line.strip()]

        def encode_entry(self, entry):
            with open_in_roots(entry, "r") as handle:
                return np.full((2, 2, 1), int(handle.read()), np.uint8), 0

    report = check_plugin(Ungated, data_roots=[root])
    warning = next(c for c in report.checks if c.name == "path gate")
    assert warning.status == "warning" and "ungated-list" in warning.message
    assert str(outside / "secret.txt") in warning.message and "inside.txt" not in warning.message
    gated = check_plugin(Gated, data_roots=[root])
    assert "path gate" not in [c.name for c in gated.checks]  # the gate refused the outside path: never opened
    assert "outside the server's data roots" in str(gated.to_dict())
    assert "path gate" not in [c.name for c in check_plugin(Ungated).checks]  # no roots given: nothing to compare


def test_a_decathlon_dataset_json_naming_files_outside_the_roots_is_refused_alike(tmp_path):
    """msd-volumes: a dataset.json path outside the roots is refused by the gate before any existence test."""
    from digits_core import FormValidationError, registry

    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "Task").mkdir(parents=True)
    outside.mkdir()
    (outside / "real.nii.gz").write_bytes(b"\x1f\x8b not really")
    messages = []
    for name in ("real.nii.gz", "missing.nii.gz"):
        entry = {"image": f"../../outside/{name}", "label": f"../../outside/{name}"}
        (root / "Task" / "dataset.json").write_text(json.dumps({"training": [entry], "labels": {"0": "bg"}}))
        plugin = registry.get_data_ingestion("msd-volumes")(data_folder=str(root / "Task"))
        with confined_to([root]), pytest.raises(FormValidationError) as exc:
            plugin.list_cases()
        messages.append(str(exc.value).replace(name, "NAME"))
    assert messages[0] == messages[1] and "data_folder" in messages[0]  # no existence oracle


def test_a_series_folder_symlink_out_of_the_roots_is_not_read(tmp_path):
    """dicom-series: a slice file that is a symlink to a file outside the roots is left out of the series."""
    from digits_data_volumes.geometry import dicom_files

    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "series").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.dcm").write_bytes(b"DICM")
    (root / "series" / "IM1.dcm").write_bytes(b"DICM")
    (root / "series" / "IM2.dcm").symlink_to(outside / "secret.dcm")
    assert [p.name for p in dicom_files(root / "series")] == ["IM1.dcm", "IM2.dcm"]  # the CLI: not confined
    with confined_to([root]):
        assert [p.name for p in dicom_files(root / "series")] == ["IM1.dcm"]


PATH_BEARING = re.compile(r"(folder|file|list|path|annotations|root|url|server|upload)$")


def _gate_table() -> dict[str, str]:
    """The plugin guide's path-gate table: first cell -> the whole row."""
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[1] / "docs" / "writing-plugins.md").read_text(encoding="utf-8")
    start = guide.index("| Plugin | Path-bearing form fields")
    rows = {}
    for line in guide[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows[line.split("|")[1].strip()] = line
    return rows


def _field_names(form) -> list[str]:
    from digits_core.forms import user_fields

    if form is None:
        return []
    bound = form(meta={"csrf": False}) if isinstance(form, type) else form
    return [f.name for f in user_fields(bound) if PATH_BEARING.search(f.name) and not f.name.startswith("s3_")]


def test_the_guides_path_gate_table_names_every_path_bearing_field_of_every_bundled_plugin():
    """Each bundled data plugin has a row; each of its path/URL fields is named in it or in a shared row."""
    import inspect

    from digits_core.plugins.registry import registry
    from digits_core.web import volume_inference

    rows = _gate_table()
    shared = " ".join(text for first, text in rows.items() if not first.startswith("`"))
    bundled = {pid: cls for pid, cls in registry.data_ingestions().items() if cls.__module__.startswith("digits_data_")}
    assert {"dicomweb-volumes", "msd-volumes", "dicom-series", "image-regression"} <= set(bundled)
    missing = []
    for pid, cls in sorted(bundled.items()):
        row = next((text for first, text in rows.items() if first.startswith(f"`{pid}`")), None)
        if row is None:
            missing.append(f"{pid}: no row")
            continue
        inference = cls.get_inference_form() if hasattr(cls, "get_inference_form") else None
        for name in _field_names(cls.get_dataset_form()) + _field_names(inference):
            if f"`{name}`" not in row and f"`{name}`" not in shared:
                missing.append(f"{pid}: {name}")
    # Test a volume's own fields (the volume page posts them beside the plugin's inference form).
    source = inspect.getsource(volume_inference)
    posted = set(re.findall(r'request\.(?:form|files)(?:\.get\(|\[)"(\w+)"', source)) - {"input_mode"}
    assert {"server_path", "label_path", "volume_file", "label_file"} <= posted
    volume_row = next(text for first, text in rows.items() if first.startswith("*Test a volume*"))
    missing += [
        f"Test a volume: {name}"
        for name in sorted(posted | {"dicomweb_url", "dicomweb_server"})
        if f"`{name}`" not in volume_row
    ]
    assert not missing, f"docs/writing-plugins.md's path-gate table misses: {missing}"
