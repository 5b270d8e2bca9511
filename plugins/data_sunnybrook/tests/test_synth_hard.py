"""Hard minority patients of the synthetic generator: each kind differs as designed, the default is unchanged."""

from __future__ import annotations

import hashlib

import numpy as np
import pydicom
import pytest
from scipy import ndimage

from digits_data_sunnybrook.contours import rasterize_polygon, read_contour
from digits_data_sunnybrook.layout import pad_case
from digits_data_sunnybrook.synth import TRAINING_CONTOURS, generate, main
from digits_data_sunnybrook.synth_hard import HARD_KINDS, hard_cases

#: sha256 of the pixels and contour files of ``generate(cases=3, size=32, seed=0, slices=2)`` made by the
#: generator before hard patients existed (commit 491b758): the default output must stay byte for byte.
DEFAULT_DIGEST = "46f823c84982aea6bf2ececd3b6d6934d4ee9d96dca5b03ed9c4ed3ce1e6929a"


def _content(root) -> dict[str, bytes]:
    """Relative path -> pixel bytes (DICOM) or text bytes (contours): what a dataset is made of.

    Pixels rather than whole files: the file meta names the pydicom version that wrote it.
    """
    out = {}
    for path in sorted(root.rglob("*")):
        if path.suffix == ".dcm":
            out[str(path.relative_to(root))] = pydicom.dcmread(path).PixelData
        elif path.suffix == ".txt":
            out[str(path.relative_to(root))] = path.read_bytes()
    return out


def _digest(content: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for name, data in content.items():
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()


def test_default_output_is_what_it_was(tmp_path):
    a = generate(tmp_path / "a", cases=3, size=32, seed=0, slices=2)
    b = generate(tmp_path / "b", cases=3, size=32, seed=0, slices=2, hard_fraction=0.0)
    assert a.hard == {} == b.hard
    assert _digest(_content(a.root)) == DEFAULT_DIGEST == _digest(_content(b.root))


def test_routine_patients_of_a_hard_pool_are_drawn_as_without_it(tmp_path):
    plain = _content(generate(tmp_path / "plain", cases=6, size=32, seed=3, slices=1).root)
    mixed = generate(tmp_path / "mixed", cases=6, size=32, seed=3, slices=1, hard_fraction=0.5)
    assert len(mixed.hard) == 3
    content = _content(mixed.root)
    assert content.keys() == plain.keys()
    for case in mixed.cases:
        mine = [n for n in content if f"/{case}/" in n or f"/{pad_case(case)}/" in n]
        assert mine
        if case in mixed.hard:  # a hard patient's images differ
            assert any(content[n] != plain[n] for n in mine if n.endswith(".dcm")), case
        else:  # a routine patient's files are those of the pool without hard patients
            assert all(content[n] == plain[n] for n in mine), case


def test_hard_patients_are_chosen_by_fraction_and_kinds_dealt_in_turn():
    assert hard_cases(0, 40, 0.0) == {}
    chosen = hard_cases(0, 40, 0.25)
    assert len(chosen) == 10 and all(0 <= i < 40 for i in chosen)
    assert sorted(chosen.values()) == sorted(HARD_KINDS * 2)
    assert hard_cases(0, 40, 0.25) == chosen != hard_cases(1, 40, 0.25)
    assert set(hard_cases(0, 10, 0.5, ["low-snr"]).values()) == {"low-snr"}
    for fraction, kinds in ((1.5, HARD_KINDS), (-0.1, HARD_KINDS), (0.2, ["purple"]), (0.2, [])):
        with pytest.raises(ValueError, match="hard"):
            hard_cases(0, 10, fraction, kinds)


def _images(result, case):
    """(pixels, LV mask, myocardial ring) per contoured image of ``case``."""
    series = result.cases[case]
    expert = result.contour_folder / TRAINING_CONTOURS / pad_case(case) / "contours-manual" / "IRCCI-expert"
    out = []
    for number in result.contoured[case]:
        pixels = pydicom.dcmread(result.image_folder / case / f"IM-{series}-{number:04d}.dcm").pixel_array
        pixels = pixels.astype(np.float64)
        inner = rasterize_polygon(read_contour(expert / f"IM-0001-{number:04d}-icontour-manual.txt"), pixels.shape)
        outer = rasterize_polygon(read_contour(expert / f"IM-0001-{number:04d}-ocontour-manual.txt"), pixels.shape)
        out.append((pixels, inner.astype(bool), outer.astype(bool) & ~inner.astype(bool)))
    return out


def _bright_blobs(pixels, lv):
    """Bounding-box aspect ratios (long / short) of the bright blobs outside the LV."""
    bright = ndimage.binary_opening(pixels > 0.75 * pixels[lv].mean()) & ~ndimage.binary_dilation(lv, iterations=2)
    labels, count = ndimage.label(bright)
    ratios = []
    for box in ndimage.find_objects(labels):
        h, w = box[0].stop - box[0].start, box[1].stop - box[1].start
        if h * w >= 12:
            ratios.append(max(h, w) / min(h, w))
    return ratios


def test_each_hard_kind_differs_from_the_same_routine_patient_as_designed(tmp_path):
    cases = len(HARD_KINDS)
    routine = generate(tmp_path / "r", cases=cases, size=64, seed=0, slices=1)
    hard = generate(tmp_path / "h", cases=cases, size=64, seed=0, slices=1, hard_fraction=1.0)
    assert sorted(hard.hard.values()) == sorted(HARD_KINDS)
    for case, kind in hard.hard.items():
        for (px, lv, ring), (rpx, rlv, rring) in zip(_images(hard, case), _images(routine, case)):
            # the routine contrast: a bright blood pool in a dark ring, the noise small
            assert rpx[rlv].mean() > 2.5 * rpx[rring].mean()
            if kind == "dark-blood":  # inverted: dark blood in a bright myocardium
                assert px[lv].mean() < 0.5 * px[ring].mean()
                assert np.array_equal(lv, rlv)
            elif kind == "low-snr":  # several times the noise over a weaker signal
                assert px[lv].std() > 3 * rpx[rlv].std()
                assert (px[lv].mean() - px[ring].mean()) < 0.6 * (rpx[rlv].mean() - rpx[rring].mean())
            elif kind == "round-rv":  # a round bright blob beside the LV, where the routine RV is elongated
                assert _bright_blobs(px, lv) and min(_bright_blobs(px, lv)) < 1.3
                assert min(_bright_blobs(rpx, rlv)) > 1.3
            elif kind == "bias":  # a steep fall-off: the body's brightest tenth far above its darkest
                body = (rpx > 250) & (rpx < 700)  # the routine image's body tissue, neither blood nor muscle
                spread = lambda a: np.divide(*np.percentile(a[body], [90, 10]))  # noqa: E731
                assert spread(px) > 2.5 > 1.6 > spread(rpx)
            elif kind == "small":  # about half the radius: a quarter of the area
                assert 0.15 * rlv.sum() < lv.sum() < 0.45 * rlv.sum()


def test_command_line_hard_fraction(tmp_path, capsys):
    assert main([str(tmp_path / "o"), "--cases", "4", "--size", "32", "--slices", "1", "--hard-fraction", "0.5"]) == 0
    assert "hard patients:" in capsys.readouterr().out
    for flags, message in (
        (["--hard-fraction", "2"], "--hard-fraction must be between 0 and 1"),
        (["--hard-kinds", "purple"], "unknown hard kind 'purple'"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            main([str(tmp_path / "bad"), "--cases", "1", "--size", "32", *flags])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err
