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
import logging
import os

import numpy as np
import pytest
from wtforms import validators

import digits  # noqa: F401  (installs flask.ext.wtf)
from digits import utils
from digits.extensions.data.interface import DataIngestionInterface
from digits.utils import constants, override, subclass
from digits_core.testing import build_dataset, registered

from flask.ext.wtf import Form  # noqa: E402  (served by digits6-compat, as for DIGITS 6 plugins)


@subclass
class FolderForm(Form):
    image_folder = utils.forms.StringField("Image folder", validators=[validators.DataRequired()],
                                           tooltip="A folder of .npy images")
    folder_pct_val = utils.forms.IntegerField("% for validation", default=50, tooltip="Share of validation records")


@subclass
class RecordForm(Form):
    validation_record = utils.forms.SelectField("Record from validation set", choices=[("none", "- select record -")],
                                                default="none", tooltip="Test a record from the validation set")


@subclass
class FolderIngestion(DataIngestionInterface):
    """The Sunnybrook idiom: the folder is read in ``__init__``, the inference form is built from userdata."""

    def __init__(self, is_inference_db=False, **kwargs):
        super(FolderIngestion, self).__init__(**kwargs)
        self.userdata['is_inference_db'] = is_inference_db
        if 'records' not in self.userdata:
            paths = glob.glob(os.path.join(self.image_folder, '*.npy'))  # TypeError with no folder
            self.userdata['records'] = sorted(os.path.basename(p) for p in paths)
        self.userdata['n_val_entries'] = len(self.userdata['records']) * int(self.folder_pct_val) // 100

    @override
    def encode_entry(self, entry):
        image = np.load(os.path.join(self.image_folder, entry))
        return image[np.newaxis, ...], np.array([int(image[0, 0] > 100)])

    @override
    def itemize_entries(self, stage):
        records, n_val = self.userdata['records'], self.userdata['n_val_entries']
        if self.userdata['is_inference_db']:
            return [records[int(self.validation_record)]] if stage == constants.TEST_DB else []
        return {constants.TRAIN_DB: records[n_val:], constants.VAL_DB: records[:n_val]}.get(stage, [])

    @override
    def get_inference_form(self):
        form = RecordForm()
        for index, record in enumerate(self.userdata['records'][:self.userdata['n_val_entries']]):
            form.validation_record.choices.append((str(index), record))
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
