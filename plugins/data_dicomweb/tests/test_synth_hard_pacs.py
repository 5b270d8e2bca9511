"""The synthetic PACS with hard patients: their studies and SEG ground truth are written like the others'."""

from __future__ import annotations

import numpy as np
import pydicom

from digits_data_dicomweb.synth import SEG_DIR, main


def test_command_line_writes_hard_patients_with_their_segs(tmp_path, capsys):
    out = tmp_path / "pacs"
    flags = ["--cases", "2", "--size", "32", "--slices", "1", "--hard-fraction", "0.5", "--hard-kinds", "dark-blood"]
    assert main([str(out), *flags]) == 0
    printed = capsys.readouterr().out
    assert "hard patients: " in printed and "(dark-blood)" in printed
    hard_case = printed.split("hard patients: ")[1].split(" (")[0]
    segs = sorted((out / SEG_DIR).glob("*.dcm"))
    assert len(segs) == 4  # 2 patients x 2 contoured phases, hard or not
    seg = pydicom.dcmread(next(p for p in segs if p.name.startswith(f"{hard_case}-")))
    source_uid = seg.ReferencedSeriesSequence[0].ReferencedInstanceSequence[0].ReferencedSOPInstanceUID
    image = next(
        pydicom.dcmread(p)
        for p in (out / "challenge_training" / hard_case).glob("*.dcm")
        if pydicom.dcmread(p, stop_before_pixels=True).SOPInstanceUID == source_uid
    )
    mask = seg.pixel_array.astype(bool).reshape(image.pixel_array.shape)
    pixels = image.pixel_array.astype(np.float64)
    assert mask.sum() > 10
    assert pixels[mask].mean() < 0.5 * pixels[~mask & (pixels > 300)].mean()  # the labelled blood pool is dark


def test_command_line_refuses_a_bad_hard_fraction(tmp_path, capsys):
    try:
        main([str(tmp_path / "x"), "--hard-fraction", "-1"])
    except SystemExit as exc:
        assert exc.code == 2
    else:
        raise AssertionError("a negative fraction was accepted")
    assert "--hard-fraction must be between 0 and 1" in capsys.readouterr().err
