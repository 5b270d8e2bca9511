"""Networks for volume segmentation: ``unet3d`` (a 3-D U-Net) and ``unet2.5d`` (a 2-D U-Net on adjacent slices).

Both end in a softmax over the classes. ``unet3d`` takes ``D×H×W×C`` tiles
(each of D, H, W divisible by ``2**(levels-1)``); ``unet2.5d`` takes one
``H×W×(2r+1)C`` slice stack (the slice and ``r`` neighbours on each side as
channels) and labels the middle slice. The defaults (8 filters at the top,
3 levels) are sized for a CPU; pass ``base_filters`` / ``levels`` (e.g. as
``--network-param base_filters=32``) for a GPU.
"""

from __future__ import annotations

#: The volume networks ``digits train --network`` accepts on a DHWC dataset.
VOLUME_NETWORKS = ("unet3d", "unet2.5d")

#: The volume networks' recommended training options, declared once: a volume run resolves its options over
#: these (``TrainingOptions.resolve``) and the New Model form shows them when a volume network is chosen, so
#: ``digits train``, the form and the API run the same defaults. The run is Adam at a fixed rate.
VOLUME_DEFAULTS: dict = {
    "epochs": 40,
    "batch_size": 2,
    "learning_rate": 1e-3,
    "validation_interval": 5,
    "solver": "adam",
    "lr_policy": "fixed",
}


def _block(keras, x, filters: int, conv):
    for _ in range(2):
        x = conv(filters, 3, padding="same", use_bias=False)(x)
        x = keras.layers.GroupNormalization(groups=min(4, filters), axis=-1)(x)
        x = keras.layers.LeakyReLU(0.01)(x)
    return x


def build_unet(input_channels: int, num_classes: int, *, dims: int = 3, base_filters: int = 8, levels: int = 3):
    """A U-Net of ``dims`` (2 or 3) spatial dimensions with any input size (divisible by ``2**(levels-1)``)."""
    import keras

    conv = keras.layers.Conv3D if dims == 3 else keras.layers.Conv2D
    pool = keras.layers.MaxPooling3D if dims == 3 else keras.layers.MaxPooling2D
    up = keras.layers.Conv3DTranspose if dims == 3 else keras.layers.Conv2DTranspose
    inputs = keras.Input((None,) * dims + (input_channels,))
    x, skips = inputs, []
    for level in range(levels):
        x = _block(keras, x, base_filters * 2**level, conv)
        if level < levels - 1:
            skips.append(x)
            x = pool(2)(x)
    for level in reversed(range(levels - 1)):
        x = up(base_filters * 2**level, 2, strides=2)(x)
        x = keras.layers.Concatenate()([x, skips[level]])
        x = _block(keras, x, base_filters * 2**level, conv)
    outputs = conv(num_classes, 1, activation="softmax", dtype="float32")(x)
    return keras.Model(inputs, outputs, name=f"unet{dims}d")


def dice_ce_loss(num_classes: int):
    """Cross-entropy plus soft Dice (mean over foreground classes, summed over the batch's voxels)."""
    import tensorflow as tf

    def loss(labels, probs):
        labels = tf.cast(labels, tf.int32)
        ce = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, probs))
        onehot = tf.one_hot(labels, num_classes, dtype=probs.dtype)
        axes = tf.range(tf.rank(probs) - 1)
        inter = tf.reduce_sum(onehot * probs, axis=axes)
        denom = tf.reduce_sum(onehot + probs, axis=axes)
        dice = (2.0 * inter + 1e-5) / (denom + 1e-5)
        return ce + 1.0 - tf.reduce_mean(dice[1:])

    return loss
