"""DIGITS 6 idioms the compat layer must carry, in process (no TensorFlow, no pip install).

* a data plugin that reads its folder in ``__init__`` and builds its inference
  form's choices from the dataset's userdata (DIGITS 6's Sunnybrook plugin):
  ``digits infer`` is quiet without a model and accepts the dataset's
  choices with ``--model``;
* a float ``1×story×sentence`` label (DIGITS 6's bAbI plugin): stored raw,
  never as boxes, whatever the sentence length.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from wtforms import validators

import digits  # noqa: F401  (installs flask.ext.wtf)
from digits import utils
from digits.extensions.data.interface import DataIngestionInterface
from digits.utils import constants, override, subclass
from digits_core.datasets import open_dataset
from digits_core.plugins.testing import build_dataset, registered

from flask.ext.wtf import Form  # noqa: E402  (served by digits6-compat, as for DIGITS 6 plugins)


@subclass
class FolderForm(Form):
    image_folder = utils.forms.StringField(
        "Image folder", validators=[validators.DataRequired()], tooltip="A folder of .npy images"
    )
    folder_pct_val = utils.forms.IntegerField("% for validation", default=50, tooltip="Share of validation records")


@subclass
class RecordForm(Form):
    validation_record = utils.forms.SelectField(
        "Record from validation set",
        choices=[("none", "- select record -")],
        default="none",
        tooltip="Test a record from the validation set",
    )


class Record(object):
    """Sunnybrook's ``Contour``: an object kept in userdata (DIGITS 6 pickled the job; JSON cannot hold it)."""

    def __init__(self, path):
        self.path = path
        self.case = os.path.basename(path)[:-4]


@subclass
class FolderIngestion(DataIngestionInterface):
    """The Sunnybrook idiom: the folder is read in ``__init__``, the inference form is built from userdata."""

    def __init__(self, is_inference_db=False, **kwargs):
        super(FolderIngestion, self).__init__(**kwargs)
        self.userdata["is_inference_db"] = is_inference_db
        if "records" not in self.userdata:
            paths = glob.glob(os.path.join(self.image_folder, "*.npy"))  # TypeError with no folder
            self.userdata["records"] = [Record(p) for p in sorted(paths)]
        self.userdata["n_val_entries"] = len(self.userdata["records"]) * int(self.folder_pct_val) // 100

    @override
    def encode_entry(self, entry):
        image = np.load(entry.path)
        return image[np.newaxis, ...], np.array([int(image[0, 0] > 100)])

    @override
    def itemize_entries(self, stage):
        records, n_val = self.userdata["records"], self.userdata["n_val_entries"]
        if self.userdata["is_inference_db"]:
            return [records[int(self.validation_record)]] if stage == constants.TEST_DB else []
        return {constants.TRAIN_DB: records[n_val:], constants.VAL_DB: records[:n_val]}.get(stage, [])

    @override
    def get_inference_form(self):
        form = RecordForm()
        for index, record in enumerate(self.userdata["records"][: self.userdata["n_val_entries"]]):
            form.validation_record.choices.append((str(index), record.case))
        return form

    @staticmethod
    def get_inference_template(form):
        return "{{ form.validation_record }}", {"form": form}

    @staticmethod
    def get_id():
        return "folder6"

    @staticmethod
    def get_title():
        return "Folder (DIGITS 6)"

    @staticmethod
    def get_dataset_form():
        return FolderForm()

    @staticmethod
    def get_dataset_template(form):
        return "{{ form.image_folder }}", {"form": form}


@pytest.fixture
def folder(tmp_path):
    path = tmp_path / "images"
    path.mkdir()
    for i in range(6):
        np.save(path / f"img{i}.npy", np.full((4, 4), 40 * i, np.uint8))
    return path


def test_infer_options_come_from_the_models_dataset_and_are_quiet_without_one(folder, tmp_path, caplog):
    from digits_core import cli
    from digits_core.jobs import Job

    jobs = tmp_path / "jobs"
    dataset = build_dataset(FolderIngestion, {"image_folder": str(folder)}, jobs_dir=jobs)
    assert dataset.count("train") == 3 and dataset.count("val") == 3 and dataset.label_kind == "class"
    marker = dataset.userdata["records"]  # the Record objects: pickled in the job folder, a marker in dataset.json
    assert marker == {
        "digits6_pickled": "digits6-userdata.pkl",
        "key": "records",
        "job_file": str(jobs / dataset.id / "digits6-userdata.pkl"),
    }  # resolved by the reader
    stored = json.loads((jobs / dataset.id / "dataset" / "dataset.json").read_text())["userdata"]["records"]
    assert stored == {"digits6_pickled": "digits6-userdata.pkl", "key": "records", "job_file": "digits6-userdata.pkl"}
    again = FolderIngestion(is_inference_db=True, **dataset.userdata, validation_record="1")
    assert [r.case for r in again.userdata["records"]] == [f"img{i}" for i in range(6)]
    assert [r.case for r in again.itemize_entries("test")] == ["img1"]
    moved = tmp_path / "moved-jobs"  # the jobs folder moved elsewhere: the objects come back from the new place
    shutil.move(str(jobs), moved)
    relocated = open_dataset(dataset.id, jobs_dir=moved)
    assert relocated.userdata["records"]["job_file"] == str(moved / dataset.id / "digits6-userdata.pkl")
    assert [r.case for r in FolderIngestion(is_inference_db=True, **relocated.userdata).userdata["records"]][:1] == [
        "img0"
    ]
    shutil.move(str(moved), jobs)
    model = Job.create("model", "m", jobs_dir=jobs)
    model.update(dataset_id=dataset.id)

    def parse(*argv):
        argv = ["--jobs-dir", str(jobs), "infer", *argv]
        cli._argv[:] = argv
        try:
            return cli.build_parser("infer").parse_args(argv)
        finally:
            cli._argv[:] = []

    with registered(FolderIngestion), caplog.at_level(logging.DEBUG, logger="digits_core.cli"):
        args = parse(f"--model={model.id}", "--validation-record", "2")
        assert args.validation_record == "2"  # a choice built from the dataset's userdata (img2 is a val record)
        with pytest.raises(SystemExit):
            parse("--model", model.id, "--validation-record", "3")  # not a validation record
        caplog.clear()
        args = parse("--model", "no-such-model")  # `run` reports the unknown model; the parser stays quiet
        assert not hasattr(args, "validation_record")
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
        assert "its inference form needs a dataset (--model)" in caplog.text


@pytest.mark.parametrize("words", [5, 6])
def test_a_float_story_label_is_stored_raw_never_as_boxes(words, tmp_path):
    @subclass
    class Stories(DataIngestionInterface):
        """The bAbI idiom: a 1×story×sentence float label (5 words a sentence looked like N×5 boxes)."""

        @override
        def encode_entry(self, entry):
            story = np.full((1, 3, words), entry, np.float32)
            return np.full((1, 4, 4), entry, np.uint8), story

        @override
        def itemize_entries(self, stage):
            return list(range(4)) if stage == constants.TRAIN_DB else []

        @staticmethod
        def get_id():
            return "stories6"

        @staticmethod
        def get_title():
            return "Stories (DIGITS 6)"

        @staticmethod
        def get_dataset_form():
            return Form()

        @staticmethod
        def get_dataset_template(form):
            return "", {}

    dataset = build_dataset(Stories, {}, jobs_dir=tmp_path / "jobs")
    assert (dataset.label_kind, dataset.label_dtype, dataset.label_shape) == ("raw", "float32", (1, 3, words))
    _, labels = dataset.read_batch("train", 0, 4)
    assert labels.shape == (4, 1, 3, words) and labels[3].min() == 3.0

    from digits_core.plugins.check import WARNING, check_plugin

    report = check_plugin(Stories)  # passes, and says the story label was stored raw for want of a kind
    warned = [c for c in report.checks if c.status == WARNING]
    assert report.ok and [c.name for c in warned] == ["label kind"], str(report)
    assert f"the label of encode_entry(train: 0) (1×3×{words} float32) declares no kind" in warned[0].message
    assert "declare label_kind" in str(report)

    class DeclaredStories(Stories):
        label_kind = "raw"

    assert not [c for c in check_plugin(DeclaredStories).checks if c.status == WARNING]

    class BoxStories(Stories):  # a declared kind is the plugin's own: checked against the label, never overridden
        label_kind = "boxes"

    wrong = check_plugin(BoxStories)
    assert not wrong.ok and 'data plugin "stories6" declares label_kind "boxes": label declared as boxes' in str(wrong)


def test_plugin_check_warns_when_a_core_plugins_undeclared_label_falls_back_to_raw():
    from digits_core import DataIngestion
    from digits_core.plugins.check import WARNING, check_plugin

    class Pairs(DataIngestion):
        """A core plugin: an integer N×2 array is no known kind (a float 1-D would be regression)."""

        @staticmethod
        def get_id():
            return "pairs-raw"

        @staticmethod
        def get_title():
            return "Pairs"

        @staticmethod
        def get_dataset_form():
            return Form

        @staticmethod
        def get_dataset_template(form):
            return "", {}

        def itemize_entries(self, stage):
            return [1, 2] if stage == "train" else []

        def encode_entry(self, entry):
            return np.zeros((4, 4), np.uint8), np.full((3, 2, 2), entry, np.int32)

    report = check_plugin(Pairs)
    assert report.ok and [c.name for c in report.checks if c.status == WARNING] == ["label kind"], str(report)
    assert "(3×2×2 int32) declares no kind" in str(report)


# -- a DIGITS 6 view: C×H×W scores, a flat 256-colour palette, Python 2 dicts, static files, an inline script ----------

SEGMENTATION_VIEW = Path(__file__).resolve().parent / "digits6_plugins" / "view_segmentation"
PALETTE = [[0, 0, 0], [255, 0, 0], [0, 255, 0]]  # what a DIGITS Core dataset holds: one colour per class


@pytest.fixture
def segmentation_view(monkeypatch):
    monkeypatch.syspath_prepend(str(SEGMENTATION_VIEW))
    from digits6SegmentationView import Visualization

    with registered(Visualization):
        yield Visualization


def _scores(classes: np.ndarray, count: int = 3) -> np.ndarray:
    """A network's H×W×C output (DIGITS Core's layout) whose top class per pixel is ``classes``."""
    scores = np.zeros((*classes.shape, count), np.float32)
    scores[np.arange(classes.shape[0])[:, None], np.arange(classes.shape[1])[None, :], classes] = 1.0
    return scores


def _decode(uri: str) -> np.ndarray:
    import base64
    import io

    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).convert("RGB"))


def test_views_translations_one_by_one():
    from digits._views import digits6_template, output_to_digits6, palette_to_digits6, py2_context
    from digits_core.templating import CSP_NONCE_PLACEHOLDER, give_csp_nonce, render_plugin_template

    assert output_to_digits6(np.zeros((4, 5, 3))).shape == (3, 4, 5) and output_to_digits6(np.zeros(7)).shape == (7,)
    flat = palette_to_digits6(PALETTE)
    assert len(flat) == 768 and flat[:9] == [0, 0, 0, 255, 0, 0, 0, 255, 0] and set(flat[9:]) == {0}
    context = py2_context({"legend": {"a": 1}, "rows": [{"b": 2}]})
    assert (
        render_plugin_template(
            "{% for k, v in legend.iteritems() %}{{ k }}={{ v }}{% endfor %}"
            "{% for r in rows %}{{ r.itervalues()|list }}{% endfor %}",
            context,
        )
        == "a=1[2]"
    )
    source = digits6_template(
        "{[ angular(1) ]}<script src='/x.js'></script><script>var a = 1;</script>"
        '<script type="text/template">{{ t }}</script>'
    )
    assert "{[" not in source and "<script src='/x.js'></script>" in source
    assert f'<script nonce="{CSP_NONCE_PLACEHOLDER}">document.addEventListener("DOMContentLoaded"' in source
    assert '<script type="text/template">{{ t }}</script>' in source  # not JavaScript: left alone
    assert give_csp_nonce([f'<script nonce="{CSP_NONCE_PLACEHOLDER}">'], "abc") == ['<script nonce="abc">']


def test_a_digits6_view_gets_chw_scores_a_flat_palette_and_python2_dicts(segmentation_view):
    from digits_core.plugins.contract import create_view
    from digits_core.inference.model import DatasetMeta
    from digits_core.inference.report import render_fragments, run_view, view_static_files
    from digits_core.templating import CSP_NONCE_PLACEHOLDER

    meta = DatasetMeta(
        id="d",
        plugin_id="x",
        userdata={},
        class_labels=["background", "red", "green"],
        color_palette=PALETTE,
        feature_shape=(4, 5, 1),
        feature_dtype="uint8",
    )
    view = create_view(segmentation_view, meta, {"opacity": 40})
    classes = np.array([[1, 1, 0, 0, 2], [1, 1, 0, 0, 2], [0, 0, 0, 0, 2], [0, 0, 0, 0, 0]])
    processed = run_view(view, [("a.png", np.full((4, 5, 1), 90, np.uint8), _scores(classes), None)])
    data = processed[0].data
    assert data["class_data"] == classes.tolist()  # argmax(axis=0) over C×H×W, as in DIGITS 6
    seg = _decode(data["seg_image"])
    assert seg[0, 0].tolist() == [255, 0, 0] and seg[0, 4].tolist() == [0, 255, 0] and seg[3, 0].tolist() == [0, 0, 0]
    fragments = render_fragments(view, processed)
    header, sample = str(fragments["header"]), str(fragments["samples"][0])
    assert 'src="/digits/extension-static/view/segmentation6/js/app.js"' in header
    assert ">red</span>" in header and "background-color: #ff0000" in header  # legend.iteritems()
    assert "red: 4</span>" in sample and "green: 3</span>" in sample  # counts.iteritems()
    assert "{[" not in sample and "set_opacity" not in sample
    assert f'<script nonce="{CSP_NONCE_PLACEHOLDER}">' in sample and "function class_at" in sample
    assert [f["name"] for f in view_static_files(view, "stylesheets")] == ["digits6-compat.css"]
    scripts = view_static_files(view, "scripts")
    assert [f["name"] for f in scripts] == ["jquery.min.js"] and "jQuery v3" in scripts[0]["text"]


def test_an_offline_report_inlines_the_static_files_a_template_links(segmentation_view, caplog):
    """The header links /digits/extension-static/.../app.js and /extension-static/.../app.css: a file has no server."""
    from digits_core.plugins.contract import create_view
    from digits_core.inference.model import DatasetMeta
    from digits_core.inference.report import render_html, run_view
    from digits_core.inference.report_links import inline_static_links

    meta = DatasetMeta(
        id="d",
        plugin_id="x",
        userdata={},
        class_labels=["background", "red", "green"],
        color_palette=PALETTE,
        feature_shape=(4, 5, 1),
        feature_dtype="uint8",
    )
    view = create_view(segmentation_view, meta, {"opacity": 40})
    processed = run_view(view, [("a.png", np.full((4, 5, 1), 90, np.uint8), _scores(np.zeros((4, 5), int)), None)])
    page = render_html(view, processed)
    assert not re.search(r'(src|href)="[^"]*extension-static', page), page[:2000]
    css = (SEGMENTATION_VIEW / "digits6SegmentationView" / "static" / "css" / "app.css").read_text()
    assert f'<style data-view-static="css/app.css">\n{css}\n</style>' in page  # the overlay rule: mask over the image
    assert '<script data-view-static="js/app.js">' in page
    kept = (
        '<link rel="stylesheet" href="/extension-static/view/other6/css/app.css">'
        '<script src="/plugins/view/segmentation6/static/../view.py"></script>'
        '<link rel="stylesheet" href="/extension-static/view/segmentation6/css/missing.css">'
    )
    assert inline_static_links(kept, view) == kept  # another view's file, a path out of the folder, a missing file
    assert 'a file of view "other6", not inlined' in caplog.text and "lacks" in caplog.text


def test_extension_static_serves_the_views_folder_and_the_compat_files(segmentation_view, tmp_path):
    from digits_core.web import create_app

    app = create_app(tmp_path / "jobs", start_scheduler=False, testing=True)
    client = app.test_client()
    try:
        css = client.get("/extension-static/view/segmentation6/css/app.css")
        assert css.status_code == 200 and b"img.overlay" in css.data
        assert client.get("/digits/extension-static/view/segmentation6/js/app.js").status_code == 200
        shared = client.get("/extension-static/view/segmentation6/digits6-compat.css")
        assert shared.status_code == 200 and b".label-info" in shared.data
        assert client.get("/plugins/view/segmentation6/static/jquery.min.js").status_code == 200
        for bad in ("css/../../view.py", "%2e%2e/view.py", "nothing.css", "../../../static/jquery.min.js"):
            assert client.get(f"/extension-static/view/segmentation6/{bad}").status_code == 404, bad
        assert client.get("/extension-static/model/segmentation6/css/app.css").status_code == 404
        assert client.get("/extension-static/view/no-such-view/css/app.css").status_code == 404
    finally:
        worker = app.extensions["digits"].get("inference_worker")
        if worker is not None:
            worker.close()


def test_userdata_json_cannot_hold_is_refused_naming_the_key(tmp_path):
    """The core's own plugins stay JSON-only: the error names the key (not only the type)."""
    from digits_core import DataIngestion
    from digits_core.errors import DatasetError

    class Objects(DataIngestion):
        plugin_id = "test-objects"

        @staticmethod
        def get_dataset_form():
            return Form

        @staticmethod
        def get_dataset_template(form):
            return "", {}

        def itemize_entries(self, stage):
            self.userdata["records"] = [Record("/x/a.npy")]
            return [0] if stage == "train" else []

        def encode_entry(self, entry):
            return np.zeros((2, 2), np.uint8), 0

    with pytest.raises(DatasetError, match='userdata of plugin "test-objects": key "records" is not JSON-serializable'):
        build_dataset(Objects, {}, jobs_dir=tmp_path / "jobs")


# -- a DIGITS 6 built-in view (no setup.py, `from ..interface import`) made installable --------------------------------

BUILTIN_VIEW = Path(__file__).resolve().parent / "digits6_plugins" / "builtin_view" / "rawOutput6"


def test_wrap_digits6_writes_the_setup_and_fixes_only_the_relative_import(tmp_path, capsys):
    from digits_core.cli import main

    before = {p: p.read_bytes() for p in BUILTIN_VIEW.rglob("*") if p.is_file()}
    assert main(["plugin", "wrap-digits6", str(BUILTIN_VIEW), "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    target = tmp_path / "digits6-view-raw-output6"
    assert f"Wrote {target} (digits6-view-raw-output6, view entry point rawOutput6.view:Visualization)" in out
    assert f"pip install --no-build-isolation {target}" in out
    setup = (target / "setup.py").read_text()
    assert 'entry_points={GROUP: ["class=rawOutput6.view:Visualization"]}' in setup
    assert "from digits.extensions.view import GROUP" in setup and "'templates/view_template.html'" in setup
    view = (target / "rawOutput6" / "view.py").read_text()
    assert "from digits.extensions.view.interface import VisualizationInterface\n" in view and "..interface" not in view
    original = (BUILTIN_VIEW / "view.py").read_text()
    assert view == original.replace("from ..interface import", "from digits.extensions.view.interface import")
    assert {p: p.read_bytes() for p in BUILTIN_VIEW.rglob("*") if p.is_file()} == before  # the folder is untouched
    assert main(["plugin", "wrap-digits6", str(BUILTIN_VIEW), "--dir", str(tmp_path)]) != 0  # never overwrites
    assert "exists already" in capsys.readouterr().err

    bare = shutil.copytree(BUILTIN_VIEW, tmp_path / "bare" / "rawOutput6")
    (bare / "__init__.py").unlink()  # a folder whose package file was not kept
    assert main(["plugin", "wrap-digits6", str(bare), "--dir", str(tmp_path / "out")]) == 0
    written = tmp_path / "out" / "digits6-view-raw-output6" / "rawOutput6" / "__init__.py"
    assert written.read_text().startswith("from .view import Visualization")


def test_import_dicom_is_pydicom_with_read_file(tmp_path):
    """DIGITS 6's Sunnybrook plugin: ``import dicom; dicom.read_file(path).pixel_array`` on pydicom 3."""
    import dicom
    import pydicom
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID = "1.2.840.10008.5.1.4.1.1.4", generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = FileDataset("x.dcm", {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID, ds.SOPInstanceUID = meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID
    ds.Rows, ds.Columns, ds.SamplesPerPixel, ds.PhotometricInterpretation = 4, 5, 1, "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
    ds.PixelData = np.arange(20, dtype=np.uint16).tobytes()
    ds.save_as(tmp_path / "IM-0001-0001.dcm", enforce_file_format=True)

    assert not hasattr(pydicom, "read_file")  # pydicom 3 removed it
    image = dicom.read_file(str(tmp_path / "IM-0001-0001.dcm")).pixel_array
    assert image.shape == (4, 5) and image[3, 4] == 19
    assert dicom.Dataset is pydicom.Dataset and dicom.dcmread is pydicom.dcmread
