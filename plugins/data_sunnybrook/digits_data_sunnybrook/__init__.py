"""DIGITS data plugin for the Sunnybrook cardiac MRI data (left-ventricle segmentation).

Modules:

* :mod:`digits_data_sunnybrook.dicom`: robust DICOM image reading, reusable by any plugin.
* :mod:`digits_data_sunnybrook.contours`: contour files and their rasterization to masks.
* :mod:`digits_data_sunnybrook.synth`: a synthetic data set in the exact Sunnybrook layout.
* :mod:`digits_data_sunnybrook.ingestion`: the ``image-sunnybrook`` data plugin.

Importing the package is cheap: pydicom and Pillow are imported inside functions.
"""

__version__ = "0.1.0"
