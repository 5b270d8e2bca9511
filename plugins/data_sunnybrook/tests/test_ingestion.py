"""SunnybrookIngestion on the synthetic set: forms, patient split, masks, dtypes, series, bad files."""

from __future__ import annotations

import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pydicom
import pytest
from pydicom.data import get_testdata_file
from pydicom.pixels import get_decoder
from pydicom.uid import JPEGLSLossless

from digits_core import FormValidationError, validate_values
from digits_core.errors import DatasetError
from digits_data_sunnybrook.contours import ContourError, rasterize_polygon, read_contour
from digits_data_sunnybrook.dicom import DicomReadError, MissingDecoderError
from digits_data_sunnybrook.ingestion import CLASS_LABELS, Entry, SunnybrookIngestion, split_cases
from digits_data_sunnybrook.synth import CONTOURS_DIR, IMAGES_DIR, TRAINING_CONTOURS

FORM = SunnybrookIngestion.get_dataset_form()


def form_values(root, **extra):
    values = {"image_folder": str(Path(root) / IMAGES_DIR), "contour_folder": str(Path(root) / CONTOURS_DIR)}
    values.update(extra)
    return validate_values(FORM, values, "dataset form")


def plugin_for(root, **extra):
    return SunnybrookIngestion(**form_values(root, **extra))


def test_import_is_light():
    code = (
        "import sys, digits_data_sunnybrook.ingestion as m; m.SunnybrookIngestion.get_dataset_form(); "
        "print('pydicom' in sys.modules, 'PIL' in sys.modules, 'tensorflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "False", "False"], out.stderr


def test_plugin_identity_and_registry():
    from digits_core import registry

    assert SunnybrookIngestion.get_id() == "image-sunnybrook"
    assert SunnybrookIngestion.get_category() == "Images"
    assert registry.get_data_ingestion("image-sunnybrook") is SunnybrookIngestion


def test_form_defaults(synth_root):
    values = form_values(synth_root.root)
    assert values["channel_conversion"] == "L" and values["pct_val"] == 10
    assert values["contour_type"] == "i" and values["seed"] == 0 and values["series_override"] == ""


def test_form_accepts_training_data_contours_folder(synth_root):
    root = synth_root.root
    values = form_values(root, contour_folder=str(root / CONTOURS_DIR / TRAINING_CONTOURS))
    assert len(SunnybrookIngestion(**values).itemize_entries("train")) > 0


def test_form_messages_say_what_was_found(synth_root, tmp_path):
    root = synth_root.root
    with pytest.raises(FormValidationError) as info:
        validate_values(FORM, {"image_folder": str(root), "contour_folder": str(tmp_path / "nope")})
    errors = info.value.errors
    assert "has no case folders" in errors["image_folder"][0]
    assert "challenge_training/" in errors["image_folder"][0] and "did you mean" in errors["image_folder"][0]
    assert "does not exist" in errors["contour_folder"][0]
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(FormValidationError) as info:
        validate_values(FORM, {"image_folder": str(tmp_path / "file.txt"), "contour_folder": str(tmp_path / "empty")})
    assert "is a file, not a folder" in info.value.errors["image_folder"][0]
    assert "it is empty" in info.value.errors["contour_folder"][0]
    with pytest.raises(FormValidationError) as info:
        form_values(root, pct_val=95, contour_type="p1", series_override="SC-HF-I-1 0004")
    assert set(info.value.errors) == {"pct_val", "contour_type", "series_override"}
    assert "CASE=SERIES" in info.value.errors["series_override"][0]


def test_form_rejects_folders_without_common_cases(synth_copy):
    images = synth_copy / IMAGES_DIR
    for k, case in enumerate(sorted(images.iterdir())):
        case.rename(images / f"SC-N-{90 + k}")
    with pytest.raises(FormValidationError, match="has an image folder"):
        form_values(synth_copy)


def test_split_is_by_patient_and_seeded():
    cases = [f"SC-N-{k}" for k in range(1, 21)]
    train, val = split_cases(cases, 10, seed=0)
    assert len(val) == 2 and len(train) == 18 and not set(train) & set(val)
    assert split_cases(list(reversed(cases)), 10, seed=0) == (train, val)
    assert split_cases(cases, 10, seed=1) != (train, val)
    assert split_cases(cases[:3], 10, 0)[1] != [] and len(split_cases(cases[:1], 50, 0)[0]) == 1
    assert split_cases(cases, 0, 0)[1] == []


def test_entries_split_by_case_and_recorded(synth_root):
    plugin = plugin_for(synth_root.root, pct_val=34)
    train, val = plugin.itemize_entries("train"), plugin.itemize_entries("val")
    assert plugin.itemize_entries("test") == []
    train_cases, val_cases = {e.case for e in train}, {e.case for e in val}
    assert not train_cases & val_cases and len(val_cases) == 1
    assert plugin.userdata["split"] == {"train": sorted(train_cases), "val": sorted(val_cases)}
    assert plugin.userdata["class_labels"] == CLASS_LABELS == ["background", "left ventricle"]
    assert len(plugin.userdata["color_palette"]) == 2
    assert plugin.userdata["series"] == synth_root.cases
    assert set(plugin.userdata["series_source"].values()) == {"table"}
    assert len(train) + len(val) == sum(len(v) for v in synth_root.contoured.values())
    assert pickle.loads(pickle.dumps(plugin)).itemize_entries("val") == val
    assert "IM-0001-" in str(val[0]) and val[0].image in str(val[0])


def test_masks_equal_rasterized_contours_and_dtype_is_kept(synth_root):
    plugin = plugin_for(synth_root.root)
    for entry in plugin.itemize_entries("train")[:6]:
        feature, label = plugin.encode_entry(entry)
        raw = pydicom.dcmread(entry.image).pixel_array
        assert feature.shape == (64, 64, 1) and feature.dtype == np.uint16
        np.testing.assert_array_equal(feature[..., 0], raw)
        assert label.shape == (64, 64) and label.dtype == np.uint8 and set(np.unique(label)) == {0, 1}
        np.testing.assert_array_equal(label, rasterize_polygon(read_contour(entry.contour), (64, 64)))
        # the bright blood pool of the synthetic image is exactly the label
        assert raw[label == 1].mean() > 2 * raw[label == 0].mean()


def test_outer_contours_and_rgb(synth_root):
    inner = plugin_for(synth_root.root).itemize_entries("train")[0]
    plugin = plugin_for(synth_root.root, contour_type="o", channel_conversion="RGB")
    entry = plugin.itemize_entries("train")[0]
    assert entry.contour.endswith("-ocontour-manual.txt")
    feature, label = plugin.encode_entry(entry)
    assert feature.shape == (64, 64, 3) and feature.dtype == np.uint16
    assert (feature[..., 0] == feature[..., 2]).all()
    _, inner_label = plugin.encode_entry(inner)
    assert label.sum() > inner_label.sum()


def test_series_override_and_automatic_detection(synth_copy):
    # a case unknown to the table: rename SC-HF-I-4 to SC-N-77 (images and contours)
    images = synth_copy / IMAGES_DIR
    (images / "SC-HF-I-4").rename(images / "SC-N-77")
    contours = synth_copy / CONTOURS_DIR / TRAINING_CONTOURS
    (contours / "SC-HF-I-04").rename(contours / "SC-N-77")
    plugin = plugin_for(synth_copy, pct_val=0)
    plugin.itemize_entries("train")
    # the long-axis decoy 0117 shares image numbers 1..20 but not all contoured ones; 0118 has 3 files
    assert plugin.userdata["series"]["SC-N-77"] == "0116"
    assert plugin.userdata["series_source"]["SC-N-77"] == "detected"
    # an override wins; a wrong one gives per-entry "image file not found" errors naming the file
    plugin = plugin_for(synth_copy, pct_val=0, series_override="SC-N-77=0117, SC-HF-I-1:4")
    entries = plugin.itemize_entries("train")
    assert plugin.userdata["series_source"] == {"SC-HF-I-1": "override", "SC-HF-I-2": "table", "SC-N-77": "override"}
    bad = [e for e in entries if e.case == "SC-N-77" and e.number > 20][0]
    with pytest.raises(DicomReadError, match="image file not found .*refers to image"):
        plugin.encode_entry(bad)


def test_detection_refuses_ambiguous_series(synth_copy):
    images = synth_copy / IMAGES_DIR
    case = images / "SC-HF-I-2"
    (images / "SC-HF-I-2").rename(images / "SC-N-78")
    contours = synth_copy / CONTOURS_DIR / TRAINING_CONTOURS
    (contours / "SC-HF-I-02").rename(contours / "SC-N-78")
    for path in (images / "SC-N-78").glob("IM-0106-*.dcm"):  # an identical copy as series 0200
        shutil.copy(path, path.with_name(path.name.replace("IM-0106-", "IM-0200-")))
    plugin = plugin_for(synth_copy, pct_val=0)
    plugin.itemize_entries("train")
    assert "SC-N-78" not in plugin.userdata["series"]
    assert any("series 0106, 0200 all match" in w and "series override" in w for w in plugin.userdata["skipped_cases"])
    assert not case.exists()


def test_bad_files_fail_their_entry_with_the_file_named(synth_copy, tmp_path):
    plugin = plugin_for(synth_copy, pct_val=0)
    entries = plugin.itemize_entries("train")
    text, cut, rt, contour = entries[0], entries[1], entries[2], entries[3]
    Path(text.image).write_text("just text\n")
    data = Path(cut.image).read_bytes()
    Path(cut.image).write_bytes(data[: len(data) // 2])
    shutil.copy(get_testdata_file("rtstruct.dcm"), rt.image)
    Path(contour.contour).write_text("12.5 13.5\nnot numbers\n")
    for entry, error, words in [
        (text, DicomReadError, "not a usable DICOM image|no DICOM image data"),
        (cut, DicomReadError, r"pixel data truncated: \d+ of 8192 bytes"),
        (rt, DicomReadError, "RT Structure Set Storage"),
        (contour, ContourError, "line 2"),
    ]:
        path = entry.contour if error is ContourError else entry.image
        with pytest.raises(error, match=words) as info:
            plugin.encode_entry(entry)
        assert str(info.value).startswith(path)
    feature, label = plugin.encode_entry(entries[4])  # the others still work
    assert feature.dtype == np.uint16 and label.any()


def test_missing_decoder_fails_before_encoding(synth_copy):
    if get_decoder(JPEGLSLossless).is_available:
        pytest.skip("a JPEG-LS decoder is installed here")
    plugin = plugin_for(synth_copy, pct_val=0)
    entry = SunnybrookIngestion(**form_values(synth_copy, pct_val=0)).itemize_entries("train")[0]
    shutil.copy(get_testdata_file("MR_small_jpeg_ls_lossless.dcm"), entry.image)
    with pytest.raises(MissingDecoderError, match=r"digits-data-sunnybrook\[codecs\]") as info:
        plugin.itemize_entries("train")
    assert entry.image in str(info.value)


def test_inference_from_a_file_and_from_a_validation_record(synth_root):
    plugin = plugin_for(synth_root.root, pct_val=34)
    val = plugin.itemize_entries("val")
    inference_form = SunnybrookIngestion.get_inference_form()
    with pytest.raises(FormValidationError, match="give a DICOM file or a validation record"):
        validate_values(inference_form, {})
    values = validate_values(inference_form, {"dicom_file": val[0].image})
    infer = SunnybrookIngestion(is_inference_db=True, **values)
    assert infer.itemize_entries("train") == [] and infer.itemize_entries("val") == []
    (entry,) = infer.itemize_entries("test")
    feature, label = infer.encode_entry(entry)
    assert feature.shape == (64, 64, 1) and label is None
    # a validation record, with the dataset's userdata merged in (as DIGITS did)
    merged = {**plugin.userdata, **validate_values(inference_form, {"validation_record": "1"})}
    (entry,) = SunnybrookIngestion(is_inference_db=True, **merged).itemize_entries("test")
    assert entry == val[1]
    name = f"{val[2].case}/{val[2].number:04d}"
    (entry,) = SunnybrookIngestion(is_inference_db=True, **{**merged, "validation_record": name}).itemize_entries(
        "test"
    )
    feature, label = plugin.encode_entry(entry)
    np.testing.assert_array_equal(label, rasterize_polygon(read_contour(val[2].contour), (64, 64)))
    train_case = plugin.userdata["split"]["train"][0]
    with pytest.raises(DatasetError, match="not .*in the validation set|no i-contoured image"):
        SunnybrookIngestion(is_inference_db=True, **{**merged, "validation_record": f"{train_case}/1"}).itemize_entries(
            "test"
        )
    with pytest.raises(DatasetError, match="out of range"):
        SunnybrookIngestion(is_inference_db=True, **{**merged, "validation_record": "999"}).itemize_entries("test")
    with pytest.raises(DatasetError, match="needs the dataset's userdata"):
        SunnybrookIngestion(is_inference_db=True, validation_record="0").itemize_entries("test")


def test_templates_render_every_field(synth_root):
    from jinja2 import Environment, FileSystemLoader

    import digits_core

    env = Environment(
        loader=FileSystemLoader(str(Path(digits_core.__file__).parent / "web" / "templates")), autoescape=True
    )
    form = FORM(meta={"csrf": False})
    source, context = SunnybrookIngestion.get_dataset_template(form)
    html = env.from_string(source).render(form=form, **context)
    for field in form:
        assert f'name="{field.name}"' in html
    inference = SunnybrookIngestion.get_inference_form()(meta={"csrf": False})
    source, context = SunnybrookIngestion.get_inference_template(inference)
    html = env.from_string(source).render(form=inference, **context)
    assert 'name="dicom_file"' in html and 'name="validation_record"' in html


def test_entry_str_names_both_files():
    entry = Entry("SC-N-2", 21, "/a/IM-0898-0021.dcm", "/b/IM-0001-0021-icontour-manual.txt")
    assert str(entry) == "/a/IM-0898-0021.dcm (contour /b/IM-0001-0021-icontour-manual.txt)"
