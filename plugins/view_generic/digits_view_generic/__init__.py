"""DIGITS view plugins for generic (non-class) outputs.

* ``regression`` (:mod:`.regression`): predicted vs true values per input,
  MAE/RMSE per target and a predicted-vs-true scatter plot.
* ``image-output`` (:mod:`.image_output`): input, output and target images
  side by side with PSNR/SSIM (image-to-image models).

Metrics live in :mod:`.metrics` and the server-side SVG plot in
:mod:`.scatter` (no JavaScript, so HTML reports stay self-contained).
"""

__version__ = "0.1.0"
