"""Evaluation on a held-out test set: metrics per task equal to the reference libraries.

* :mod:`~digits_core.evaluation.classification`: accuracy, top-k, per-class precision/recall/F1, averages,
  confusion matrix, one-vs-rest ROC-AUC and average precision, calibration error, bootstrap intervals
  (as scikit-learn computes them).
* :mod:`~digits_core.evaluation.detection`: COCO AP@[.5:.95], AP50, AP75, AR per class, the
  F1-versus-confidence curve (as pycocotools computes them).
* :mod:`~digits_core.evaluation.segmentation`: Dice, IoU, HD95, ASSD, NSD and volume difference per
  case and class, spacing-aware, summarised in nnU-Net's ``summary.json`` layout.
* :mod:`~digits_core.evaluation.regression`: MAE, RMSE, R² per target; PSNR and SSIM (as scikit-learn
  and scikit-image compute them).

The metric modules need numpy (and scipy for distances and SSIM) only.
"""
