"""3-D volume segmentation without TensorFlow: metrics, patch sampling, sliding-window inference, results.

* :mod:`.metrics` — per-case Dice, per-class Dice and HD95 in mm (spacing honoured);
* :mod:`.patches` — training patches with foreground oversampling and 3-D augmentation;
* :mod:`.sliding` — sliding-window inference over a whole volume with Gaussian blending;
* :mod:`.results` — label volumes back as NIfTI with the source's affine.

The training loop and the networks are :mod:`digits_core.engine.volume_train`
and :mod:`digits_core.engine.volume_nets`.
"""
