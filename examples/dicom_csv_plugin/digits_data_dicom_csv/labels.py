"""Read the labels CSV: a header row ``file,label``, then one row per DICOM file."""

from __future__ import annotations

import csv


def read_labels(csv_path):
    """Return ``[(file, label), ...]`` from a labels CSV.

    ``file`` is relative to the DICOM folder and may use ``/`` or ``\\``.

    Raises:
        ValueError: The header lacks ``file`` or ``label``, a row is
            incomplete, or there are no rows; the message names the line.
    """
    with open(csv_path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        columns = [name.strip().lower() for name in reader.fieldnames or []]
        if "file" not in columns or "label" not in columns:
            raise ValueError(f"{csv_path}: the header must name the columns 'file' and 'label' (found {columns})")
        reader.fieldnames = columns
        rows = []
        for row in reader:
            name, label = (row.get("file") or "").strip(), (row.get("label") or "").strip()
            if not name or not label:
                raise ValueError(f"{csv_path}, line {reader.line_num}: both 'file' and 'label' are needed")
            rows.append((name, label))
    if not rows:
        raise ValueError(f"{csv_path}: no rows after the header")
    return rows
