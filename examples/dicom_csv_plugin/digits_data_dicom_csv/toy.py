"""Write a toy data set for trying and testing the plugin: real DICOM files and a labels CSV.

``python -m digits_data_dicom_csv.toy OUT_DIR [--patients 6] [--images 4] [--size 32] [--seed 0]``
writes ``OUT_DIR/<PatientID>/IM-<n>.dcm`` (CT Image Storage, explicit VR
little endian with file meta, 16-bit unsigned stored in 12 bits,
RescaleIntercept -1024 so values are Hounsfield units) and
``OUT_DIR/labels.csv``. Each image is a water disc (0 HU) in air
(-1000 HU); images of class ``lesion`` add a bright spot (+400 HU).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np


def write_dicom(path, hounsfield, patient_id, series_uid, number):
    """Write one CT slice whose pixels, after rescale, equal ``hounsfield`` (int array)."""
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import CTImageStorage, ExplicitVRLittleEndian, generate_uid

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = CTImageStorage
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID, ds.SOPInstanceUID = CTImageStorage, meta.MediaStorageSOPInstanceUID
    ds.PatientID, ds.PatientName, ds.Modality = patient_id, f"Toy^{patient_id}", "CT"
    ds.StudyInstanceUID, ds.SeriesInstanceUID, ds.InstanceNumber = generate_uid(), series_uid, number
    ds.Rows, ds.Columns = hounsfield.shape
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
    ds.RescaleIntercept, ds.RescaleSlope = -1024, 1
    ds.PixelData = (np.asarray(hounsfield) + 1024).astype("<u2").tobytes()
    ds.save_as(path, enforce_file_format=True)


def write_toy_data(folder, patients=6, images=4, size=32, seed=0):
    """Write the toy data set into ``folder``; return the path of ``labels.csv``."""
    from pydicom.uid import generate_uid

    folder = Path(folder)
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:size, :size]
    rows = []
    for p in range(1, patients + 1):
        patient_id, series_uid = f"P{p:03d}", generate_uid()
        (folder / patient_id).mkdir(parents=True, exist_ok=True)
        for n in range(1, images + 1):
            label = "lesion" if (p + n) % 2 else "normal"
            hu = np.where((yy - size / 2) ** 2 + (xx - size / 2) ** 2 < (0.4 * size) ** 2, 0, -1000)
            if label == "lesion":
                cy, cx = rng.integers(size // 3, 2 * size // 3, 2)
                hu = np.where((yy - cy) ** 2 + (xx - cx) ** 2 < (0.1 * size) ** 2 + 1, 400, hu)
            hu = hu + rng.integers(-20, 21, hu.shape)
            name = f"{patient_id}/IM-{n:04d}.dcm"
            write_dicom(folder / name, hu, patient_id, series_uid, n)
            rows.append((name, label))
    csv_path = folder / "labels.csv"
    with open(csv_path, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([("file", "label"), *rows])
    return csv_path


def main(argv=None):
    """Command line entry: ``python -m digits_data_dicom_csv.toy OUT_DIR``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--patients", type=int, default=6)
    parser.add_argument("--images", type=int, default=4, help="images per patient")
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    csv_path = write_toy_data(args.out_dir, args.patients, args.images, args.size, args.seed)
    print(f"Wrote {args.patients * args.images} DICOM files and {csv_path}")


if __name__ == "__main__":
    main()
