"""digits6-compat: each DIGITS 6 → DIGITS Core translation, in process and without TensorFlow.

The end-to-end tests (real pip installs of DIGITS-6-style plugins, a dataset,
training, inference on the CLI and the web) are in
``tests/test_compat_digits6_plugins.py``.
"""

from __future__ import annotations

import base64
import io
import json
import pickle

import numpy as np
import pytest
from PIL import Image
from wtforms import validators

import digits
from digits.extensions.data import GROUP as DATA_GROUP
from digits.extensions.data.interface import DataIngestionInterface
from digits.extensions.view import GROUP as VIEW_GROUP
from digits.extensions.view.interface import Digits6Dataset, VisualizationInterface
from digits.utils import constants, forms, image, override, subclass
from digits._translate import feature_to_core, form_class, label_to_core, view_input, view_outputs
from digits_core.interfaces.records import DeclaredLabel
from digits._userdata import Userdata
from digits_core import DataIngestion, View
from digits_core.plugins.registry import ENTRY_POINT_GROUPS


# -- a DIGITS 6 style plugin, written as DIGITS 6 plugins are --------------------------------------

from flask.ext.wtf import Form  # noqa: E402  (served by digits6-compat, as for DIGITS 6 plugins)


@subclass
class GradientForm(Form):
    size = forms.IntegerField("Size", default=6, validators=[validators.DataRequired()], tooltip="Side in pixels")
    count = forms.IntegerField("Count", default=4, validators=[validators.NumberRange(min=1)])


@subclass
class GradientInferenceForm(Form):
    slope = forms.FloatField("Slope", validators=[forms.validate_required_iff(count=None)], tooltip="-0.5..0.5")
    count = forms.IntegerField("Count", validators=[validators.Optional()])
    record = forms.SelectField("Record", choices=[("none", "- none -")], default="none")


@subclass
class Gradients(DataIngestionInterface):
    def __init__(self, is_inference_db=False, **kwargs):
        super(Gradients, self).__init__(**kwargs)
        self.userdata["is_inference_db"] = is_inference_db
        self.userdata["class_labels"] = ["slope"]

    @override
    def encode_entry(self, entry):
        ramp = np.tile(np.arange(self.size, dtype=np.uint8) * entry, (self.size, 1))
        return ramp[np.newaxis, ...], np.array([entry, -entry], dtype=np.float64)[np.newaxis, np.newaxis, ...]

    @staticmethod
    @override
    def get_category():
        return "Images"

    @staticmethod
    @override
    def get_id():
        return "compat-unit-gradients"

    @staticmethod
    @override
    def get_title():
        return "Unit gradients"

    @staticmethod
    @override
    def get_dataset_form():
        return GradientForm()

    @staticmethod
    @override
    def get_dataset_template(form):
        return (
            '{% from "helper.html" import mark_errors %}<div class="x{{ mark_errors([form.size]) }}">'
            "{{ form.size.tooltip }}{{ form.size() }}</div>",
            {"form": form},
        )

    @override
    def get_inference_form(self):
        form = GradientInferenceForm()
        form.record.choices.append(("3", "record three"))
        return form

    @override
    def itemize_entries(self, stage):
        self.seen_stages = getattr(self, "seen_stages", []) + [stage]
        if self.userdata["is_inference_db"]:
            return [self.slope] if stage == constants.TEST_DB else []
        if stage == constants.TRAIN_DB:
            return list(range(1, self.count + 1))
        if stage == "val_db":  # a literal DIGITS 6 stage name works too
            return [1, 2]
        return []


@subclass
class Arrows(VisualizationInterface):
    def __init__(self, dataset, **kwargs):
        self.dims = dataset.get_feature_dims()
        self.labels = dataset.extension_userdata.get("class_labels")
        self.scale = kwargs["scale"]

    @staticmethod
    def get_config_form():
        form = ArrowsForm()
        return form

    @staticmethod
    def get_id():
        return "compat-unit-arrows"

    @staticmethod
    def get_title():
        return "Unit arrows"

    @override
    def process_data(self, input_id, input_data, output_data):
        first = output_data[output_data.keys()[0]]  # the Python 2 idiom DIGITS 6 views use
        return {"shape": input_data.shape, "value": float(first[0]) * self.scale, "id": input_id}

    @override
    def get_view_template(self, data):
        return "<b>{{ value }}</b>", data


class ArrowsForm(Form):
    scale = forms.IntegerField("Scale", default=2, tooltip="Multiply by")


class _Meta:
    """Stands in for DIGITS Core's dataset description (inference.model.DatasetMeta)."""

    feature_shape = (6, 6, 1)
    userdata = {"class_labels": ["slope"], "size": 6}
    plugin_id = "compat-unit-gradients"
    class_labels = ["slope"]


# -- packaging -------------------------------------------------------------------------------------


def test_groups_are_the_core_entry_point_groups():
    assert DATA_GROUP == ENTRY_POINT_GROUPS["data"] == "digits.plugins.data"
    assert VIEW_GROUP == ENTRY_POINT_GROUPS["view"] == "digits.plugins.view"


def test_interfaces_are_core_interfaces():
    assert issubclass(DataIngestionInterface, DataIngestion) and issubclass(VisualizationInterface, View)
    assert issubclass(Gradients, DataIngestion) and issubclass(Arrows, View)


def test_flask_ext_wtf_is_the_compat_form():
    import flask.ext.wtf

    assert flask.ext.wtf.Form is forms.Form
    form = GradientForm()  # no Flask app or request needed
    assert form.validate_on_submit() and str(form.hidden_tag()) == ""


def test_digits_utils_image_reachable_as_attributes():
    assert digits.utils.image.embed_image_html is image.embed_image_html
    assert digits.utils.constants.TRAIN_DB == "train_db" and constants.COLOR_PALETTE_ATTRIBUTE == "color_palette"


# -- digits.utils ----------------------------------------------------------------------------------


def test_override_without_base_method_fails_at_class_creation():
    with pytest.raises(AssertionError, match='"Broken.encode_entri" not found in any base class'):

        @subclass
        class Broken(DataIngestionInterface):
            @override
            def encode_entri(self, entry):
                return entry


def test_override_copies_the_base_docstring():
    assert "Encode one entry" in Gradients.encode_entry.__doc__


# -- translations (pure functions) -----------------------------------------------------------------


def test_feature_chw_becomes_hwc_and_dtypes_follow_digits6():
    chw = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    hwc = feature_to_core(chw)
    assert hwc.shape == (3, 4, 2) and hwc.flags["C_CONTIGUOUS"]
    assert hwc[1, 2, 1] == chw[1, 1, 2]
    assert feature_to_core(chw.astype(np.int64)).dtype == np.float32  # DIGITS 6 stored non-uint8 as float
    assert feature_to_core(chw.astype(np.uint16)).dtype == np.uint16  # stored bit-exactly by the core
    assert feature_to_core(np.zeros((5, 7), np.uint8)).shape == (5, 7)
    with pytest.raises(ValueError, match="C×H×W"):
        feature_to_core(np.zeros((1, 2, 3, 4)))


def test_labels_translate_by_digits6_shape_to_a_declared_kind():
    def kind_and_value(label, feature_hw=None):
        out = label_to_core(label, feature_hw)
        return (out.kind, out.label) if isinstance(out, DeclaredLabel) else (type(out).__name__, out)

    kind, vector = kind_and_value(np.array([0.25, -0.5])[np.newaxis, np.newaxis, ...])  # 1×1×2
    assert kind == "regression" and vector.dtype == np.float32 and vector.tolist() == [0.25, -0.5]
    assert kind_and_value(np.array([[[1.0]], [[2.0]]]))[1].tolist() == [1.0, 2.0]  # N×1×1
    kind, mask = kind_and_value(np.ones((1, 4, 5), np.uint8), (4, 5))
    assert kind == "mask" and mask.shape == (4, 5) and mask.dtype == np.uint8
    kind, image = kind_and_value(np.zeros((3, 4, 5), np.float32), (4, 5))
    assert kind == "image" and image.shape == (4, 5, 3)
    assert kind_and_value(np.array([7])) == ("int", 7)
    assert kind_and_value(np.array([0.5]))[1].tolist() == [0.5]  # a float stays a regression target
    assert label_to_core(3) == 3
    # bAbI's 1×story×sentence floats: raw with their DIGITS 6 shape, never boxes (5 words) nor a mask
    for words in (5, 6):
        kind, story = kind_and_value(np.zeros((1, 4, words), np.float32), (8, 8))
        assert kind == "raw" and story.shape == (1, 4, words)
    assert kind_and_value(np.ones((1, 4, 5), np.uint8), (6, 6))[0] == "raw"  # not the feature's H×W: no mask


def test_view_input_and_outputs():
    assert view_input(np.zeros((4, 5, 1))).shape == (4, 5)
    assert view_input(np.zeros((4, 5, 3))).shape == (4, 5, 3)
    outputs = view_outputs(np.array([1.0, 2.0]))
    assert outputs.keys() == ["output"] and outputs.keys()[0] == "output"  # a list, as in Python 2
    assert outputs["output"].tolist() == [1.0, 2.0] and outputs.items()[0][0] == "output"
    named = view_outputs({"a": np.zeros(1), "b": np.ones(1)})
    assert named.keys() == ["a", "b"]


def test_form_instance_becomes_a_class_that_keeps_instance_changes():
    def factory():
        form = GradientInferenceForm()
        form.record.choices.append(("3", "record three"))
        return form

    cls = form_class(factory(), factory)
    assert isinstance(cls, type) and issubclass(cls, GradientInferenceForm)
    bound = cls(formdata=None, meta={"csrf": False})
    assert [c[0] for c in bound.record.choices] == ["none", "3"]
    from digits_core.forms import validate_values

    assert validate_values(cls, {"record": "3", "count": "2"})["record"] == "3"
    with pytest.raises(Exception, match="Not a valid choice"):
        validate_values(cls, {"record": "4", "count": "2"})
    assert form_class(GradientForm) is GradientForm and form_class(None) is None
    assert form_class(GradientForm()) is GradientForm  # no factory: the instance's class


# -- userdata['is_inference_db'] -------------------------------------------------------------------


def test_userdata_flag_is_never_persisted():
    data = Userdata({"a": 1, "is_inference_db": True})
    assert data["is_inference_db"] is True and "is_inference_db" in data
    data["is_inference_db"] = False
    data.update({"b": 2, "is_inference_db": True})
    assert data["is_inference_db"] is True and data.get("is_inference_db") is True
    assert dict(data) == {"a": 1, "b": 2} and json.loads(json.dumps(data)) == {"a": 1, "b": 2}
    assert sorted(data) == ["a", "b"] and dict(data.items()) == {"a": 1, "b": 2}
    data["color_palette"] = [0, 0, 0, 255, 0, 0]  # DIGITS 6: a flat PIL palette
    assert data["color_palette"] == [[0, 0, 0], [255, 0, 0]]
    assert Userdata({"color_palette": [[1, 2, 3]]})["color_palette"] == [[1, 2, 3]]
    del data["color_palette"]
    copy = pickle.loads(pickle.dumps(data))
    assert dict(copy) == {"a": 1, "b": 2} and copy["is_inference_db"] is True


def test_plugin_reads_back_its_inference_flag():
    plugin = Gradients(size=4, count=2)
    assert plugin.userdata["is_inference_db"] is False and plugin.is_inference_db is False
    assert plugin.userdata == {"size": 4, "count": 2, "class_labels": ["slope"]}
    inference = Gradients(is_inference_db=True, size=4, count=2, slope=3)
    assert inference.is_inference_db is True and "is_inference_db" not in dict(inference.userdata)


# -- data plugin boundary --------------------------------------------------------------------------


def test_itemize_gets_digits6_stage_names_and_returns_lists():
    plugin = Gradients(size=4, count=3)
    assert plugin.itemize_entries("train") == [1, 2, 3]
    assert plugin.itemize_entries("val") == [1, 2] and plugin.itemize_entries("test") == []
    assert plugin.seen_stages == ["train_db", "val_db", "test_db"]


def test_encode_entry_translates_once_even_through_super():
    class Child(Gradients):
        def encode_entry(self, entry):
            feature, label = super().encode_entry(entry)
            assert feature.shape == (1, 4, 4)  # the parent's own, untranslated output
            return feature, label

    feature, label = Child(size=4, count=1).encode_entry(2)
    assert feature.shape == (4, 4, 1) and feature[0, 3, 0] == 6
    assert label.kind == "regression" and label.label.tolist() == [2.0, -2.0]  # declared by the adapter


def test_forms_are_classes_for_the_core():
    dataset_form = Gradients.get_dataset_form()
    assert isinstance(dataset_form, type) and issubclass(dataset_form, GradientForm)
    assert dataset_form(meta={"csrf": False}).size.description == "Side in pixels"  # tooltip → CLI/web help
    instance_form = Gradients(size=4, count=1).get_inference_form()  # an instance method, as in DIGITS 6
    assert isinstance(instance_form, type) and issubclass(instance_form, GradientInferenceForm)
    from digits_core.plugins.contract import inference_form

    for userdata in (None, {"size": 5, "count": 2}):  # `digits infer --help` has no dataset; the web has one
        form = inference_form(Gradients, userdata)(meta={"csrf": False})
        assert [c[0] for c in form.record.choices] == ["none", "3"]


def test_missing_dataset_form_values_take_their_defaults():
    plugin = Gradients(is_inference_db=True)  # what the core makes to list inference options
    assert (plugin.size, plugin.count) == (6, 4) and plugin.is_inference_db
    assert Gradients(size=9).userdata["size"] == 9


def test_dataset_built_by_the_core_is_hwc_regression(tmp_path):
    from digits_core.plugins.testing import build_dataset

    dataset = build_dataset(Gradients, {"size": 6, "count": 4}, jobs_dir=tmp_path / "jobs")
    assert dataset.count("train") == 4 and dataset.count("val") == 2
    assert tuple(dataset.feature_shape()) == (6, 6, 1) and dataset.feature_dtype() == "uint8"
    assert dataset.label_kind == "regression"
    features, labels = dataset.read_batch("train", 0, 4)
    assert features[2, 0, :, 0].tolist() == [0, 3, 6, 9, 12, 15]
    assert np.allclose(labels[2], [3.0, -3.0])
    assert "is_inference_db" not in dataset.userdata and dataset.userdata["class_labels"] == ["slope"]


@subclass
class Blobs(DataIngestionInterface):
    """Segmentation the DIGITS 6 (Sunnybrook) way: 1×H×W uint8 masks and a flat 256-colour palette."""

    def __init__(self, is_inference_db=False, **kwargs):
        super(Blobs, self).__init__(**kwargs)
        self.userdata["class_labels"] = ["background", "blob"]
        self.userdata[constants.COLOR_PALETTE_ATTRIBUTE] = [0, 0, 0, 255, 255, 255] + [0] * (254 * 3)

    @override
    def encode_entry(self, entry):
        mask = np.zeros((5, 7), dtype="uint8")
        mask[entry : entry + 2, entry : entry + 3] = 1
        return (mask * 200)[np.newaxis, ...], mask[np.newaxis, ...]

    @staticmethod
    def get_id():
        return "compat-unit-blobs"

    @staticmethod
    def get_dataset_form():
        return GradientForm()

    @staticmethod
    def get_dataset_template(form):
        return "{{ form.size() }}", {"form": form}

    @override
    def itemize_entries(self, stage):
        return [0, 1, 2] if stage == constants.TRAIN_DB else []


def test_masks_and_flat_palette_become_a_core_segmentation_dataset(tmp_path):
    from digits_core.plugins.testing import build_dataset

    dataset = build_dataset(Blobs, {}, jobs_dir=tmp_path / "jobs")
    assert dataset.label_kind == "mask" and tuple(dataset.feature_shape()) == (5, 7, 1)
    _, labels = dataset.read_batch("train", 1, 2)
    assert labels[0].shape == (5, 7) and int(labels[0].sum()) == 6 and labels[0][1, 1] == 1
    palette = dataset.color_palette
    assert palette[:2] == [[0, 0, 0], [255, 255, 255]] and len(palette) == 256


def test_contract_checker_passes_a_digits6_plugin():
    from digits_core.plugins.testing import check_plugin

    report = check_plugin(Gradients, form_values={"size": 6, "count": 2})
    assert report.ok, report
    assert check_plugin(Arrows).ok


# -- view plugin boundary --------------------------------------------------------------------------


def test_view_gets_digits6_dataset_three_arguments_and_named_outputs():
    view = Arrows(_Meta(), scale=3)
    assert view.dims == (6, 6, 1) and view.labels == ["slope"]
    data = view.process_data("x.png", np.zeros((6, 6, 1), np.uint8), np.array([0.5, 1.0]), None)
    assert data == {"shape": (6, 6), "value": 1.5, "id": "x.png"}
    assert view.dataset.extension_id == "compat-unit-gradients" and view.config == {"scale": 3}


def test_view_taking_ground_truth_gets_it():
    class WithTruth(Arrows):
        def process_data(self, input_id, input_data, output_data, ground_truth=None):
            return ground_truth

    view = WithTruth(_Meta(), scale=1)
    assert view.process_data("x", np.zeros((6, 6, 1)), np.zeros(2), 4) == 4


def test_view_config_form_is_a_class():
    cls = Arrows.get_config_form()
    assert isinstance(cls, type) and cls(meta={"csrf": False}).scale.data == 2


def test_dataset_proxy_delegates_to_core_metadata():
    proxy = Digits6Dataset(_Meta())
    assert proxy.get_feature_dims() == (6, 6, 1) and proxy.class_labels == ["slope"]
    assert proxy.extension_userdata == {"class_labels": ["slope"], "size": 6}

    class Reader:  # digits_core.datasets.reader.Dataset has feature_shape() as a method
        def feature_shape(self):
            return [4, 5, 3]

    assert Digits6Dataset(Reader()).get_feature_dims() == (4, 5, 3)


def test_view_renders_through_the_core_report():
    from digits_core.inference.report import render_fragments, run_view

    view = Arrows(_Meta(), scale=2)
    processed = run_view(view, [("a", np.zeros((6, 6, 1), np.uint8), np.array([0.25]), None)])
    assert str(render_fragments(view, processed)["samples"][0]) == "<b>0.5</b>"


# -- digits.utils.forms ----------------------------------------------------------------------------


class _Fields(Form):
    count = forms.IntegerField("Count", validators=[validators.Optional()])
    need = forms.StringField("Need", validators=[forms.validate_required_iff(count=None)], tooltip='say "hi" <b>')
    other = forms.StringField("Other", validators=[forms.validate_required_if_set("need")])
    low = forms.IntegerField("Low", default=1)
    high = forms.IntegerField("High", default=2, validators=[forms.validate_greater_than("low")])
    folder = forms.StringField("Folder", validators=[forms.validate_folder_path])
    file = forms.StringField("File", validators=[forms.validate_file_path])
    sizes = forms.MultiIntegerField(
        "Sizes", default=[3], validators=[forms.MultiOptional(), forms.MultiNumberRange(min=2)]
    )
    rates = forms.MultiFloatField("Rates", default=[0.1])


def _bind(**values):
    from digits_core.forms import bind_form

    form = bind_form(_Fields, {k: str(v) for k, v in values.items()}, meta={"csrf": False})
    form.validate()
    return form


def test_tooltip_renders_escaped_html_and_becomes_the_description():
    form = _Fields()
    html = str(form.need.tooltip)
    assert 'class="explanation-tooltip' in html and 'title="say &#34;hi&#34; &lt;b&gt;"' in html
    assert html.endswith(">say &#34;hi&#34; &lt;b&gt;</span>")  # visible text: no glyph font or tooltip script here
    assert form.need.description == 'say "hi" <b>' and str(form.count.tooltip) == ""
    assert str(form.need.explanation) == ""  # no explanation file given
    explained = forms.IntegerField("N", explanation="More <help>").bind(Form(), "n")
    assert 'class="explanation" hidden>More &lt;help&gt;</div>' in str(explained.explanation)
    assert str(forms.IntegerField("N", explanation_file="no/such.html").bind(Form(), "m").explanation) == ""


def test_conditional_validators(tmp_path):
    assert "need" in _bind().errors  # count empty → need required
    assert "need" not in _bind(count=3).errors
    assert _bind(count=3, need="x").errors.get("other") == ["This field is required if need is set."]
    assert _bind(low=5, high=4).errors["high"] == ["Field must be greater than low."]
    missing = tmp_path / "nope"
    errors = _bind(count=1, folder=missing, file=missing).errors
    assert errors["folder"] == ["Folder does not exist or is not reachable"]
    assert errors["file"] == ["File does not exist or is not reachable"]
    (tmp_path / "f.txt").write_text("x")
    assert not _bind(count=1, folder=tmp_path, file=tmp_path / "f.txt").errors


def test_multi_number_fields():
    form = _bind(count=1, sizes="[4, 5]", rates="0.5,0.25")
    assert form.sizes.data == [4, 5] and form.rates.data == [0.5, 0.25] and not form.errors
    assert form.sizes.tooltip is not None and form.sizes.data_array() == [4, 5]
    assert _bind(count=1, sizes="1,3").errors["sizes"] == ["Number 1 must be at least 2."]
    assert "sizes" in _bind(count=1, sizes="a,b").errors


# -- digits.utils.image ----------------------------------------------------------------------------


def _decode(uri: str) -> Image.Image:
    header, data = uri.split(",", 1)
    assert header == "data:image/png;base64"
    return Image.open(io.BytesIO(base64.b64decode(data)))


def test_embed_image_html_roundtrips_arrays_and_pil_images():
    gray = np.arange(12, dtype=np.uint8).reshape(3, 4, 1)
    assert np.array_equal(np.asarray(_decode(image.embed_image_html(gray))), gray[:, :, 0])
    rgb = Image.new("RGB", (2, 2), (10, 20, 30))
    assert _decode(image.embed_image_html(rgb)).getpixel((1, 1)) == (10, 20, 30)
    assert image.embed_image_html(None) is None
    with pytest.raises(ValueError):
        image.embed_image_html("not an image")


def test_resize_and_channels_as_digits6():
    rgb = np.zeros((10, 20, 3), np.uint8)
    rgb[:, :, 0] = 200
    assert image.resize_image(rgb, 5, 5).shape == (5, 5, 3)
    assert image.resize_image(rgb, 5, 5, channels=1, resize_mode="crop").shape == (5, 5)
    assert image.resize_image(rgb, 8, 8, resize_mode="fill").shape == (8, 8, 3)
    assert image.image_to_array(rgb, channels=1)[0, 0] == 60  # 0.299 * 200
    assert image.image_to_array(np.zeros((3, 3), np.uint8), channels=4)[0, 0, 3] == 255
    with pytest.raises(ValueError, match="not supported"):
        image.resize_image(rgb, 5, 5, resize_mode="stretch")


def test_load_image_converts_modes_and_names_missing_files(tmp_path):
    Image.new("RGBA", (3, 2), (0, 0, 0, 0)).save(tmp_path / "a.png")
    loaded = image.load_image(str(tmp_path / "a.png"))
    assert loaded.mode == "RGB" and loaded.getpixel((0, 0)) == (255, 255, 255)  # transparency over white
    with pytest.raises(image.LoadImageError, match="not found"):
        image.load_image(str(tmp_path / "missing.png"))
    (tmp_path / "bad.png").write_bytes(b"not a png")
    with pytest.raises(image.LoadImageError, match="bad.png"):
        image.load_image(str(tmp_path / "bad.png"))


def test_digits6_plugin_errors_name_the_plugin_and_method():
    from digits_core.plugins.contract import create_view
    from digits_core.errors import PluginCodeError

    with pytest.raises(PluginCodeError, match=r'plugin "compat-unit-arrows" failed in View.__init__: KeyError'):
        create_view(Arrows, _Meta(), {})  # the DIGITS 6 view reads kwargs['scale']
