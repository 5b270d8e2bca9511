"""The built-in networks, each a ``build_model(input_shape, num_outputs, **params)``.

Every network adapts to the dataset's input size (after cropping), as DIGITS
did: it only downsamples while the feature map is large enough, so LeNet runs
on 8x8 digits as well as on 28x28 MNIST, and the segmentation networks pad
inputs to a multiple of their stride and crop the output back.

Classification networks end with a softmax layer named ``probabilities``
(output ``[N, num_outputs]``); segmentation networks with a per-pixel softmax
(``[N, H, W, num_outputs]``); the regression network with a linear layer
(``[N, num_outputs]``). Inputs are already mean-subtracted and scaled by
:mod:`digits_core.engine.preprocessing`.
"""

from __future__ import annotations

import math


def _layers():
    import keras

    return keras, keras.layers


def _pools_for(size: int, wanted: int, minimum: int = 2) -> int:
    """How many 2x poolings keep the map at least ``minimum`` pixels."""
    count = 0
    while count < wanted and size // 2 >= minimum:
        size //= 2
        count += 1
    return count


def lenet(input_shape, num_outputs, dropout: float = 0.0, head: str = "softmax", **_):
    """LeNet as in DIGITS's Caffe/TF LeNet: conv20-pool-conv50-pool-fc500-relu-fc.

    From 28x28 up the convolutions are 'valid' as in DIGITS (28 -> 24 -> 12 -> 8 -> 4);
    smaller inputs (e.g. 8x8 digits) use 'same' padding so they still fit.
    """
    keras, L = _layers()
    size = min(input_shape[0], input_shape[1])
    padding = "valid" if size >= 28 else "same"
    pools = _pools_for(size, 2, minimum=2)
    inputs = keras.Input(shape=tuple(input_shape), name="image")
    x = L.Conv2D(20, 5, padding=padding, name="conv1")(inputs)
    if pools >= 1:
        x = L.MaxPooling2D(2, name="pool1")(x)
    x = L.Conv2D(50, 5, padding=padding, name="conv2")(x)
    if pools >= 2:
        x = L.MaxPooling2D(2, name="pool2")(x)
    x = L.Flatten(name="flatten")(x)
    x = L.Dense(500, activation="relu", name="fc1")(x)
    if dropout:
        x = L.Dropout(dropout, name="drop1")(x)
    x = L.Dense(num_outputs, name="fc2")(x)
    if head == "sigmoid":  # multi-label: one independent probability per class
        outputs = L.Activation("sigmoid", name="probabilities")(x)
    else:
        outputs = L.Softmax(name="probabilities")(x)
    return keras.Model(inputs, outputs, name="lenet" if head != "sigmoid" else "lenet_multilabel")


def lenet_multilabel(input_shape, num_outputs, dropout: float = 0.0, **params):
    """LeNet with a sigmoid output (``[N, num_outputs]`` independent probabilities) for multi-label data."""
    return lenet(input_shape, num_outputs, dropout=dropout, head="sigmoid")


def alexnet(input_shape, num_outputs, dropout: float = 0.5, **_):
    """AlexNet (5 conv + 3 fc); the stem's stride and the poolings adapt to the input size."""
    keras, L = _layers()
    size = min(input_shape[0], input_shape[1])
    inputs = keras.Input(shape=tuple(input_shape), name="image")
    if size >= 128:
        x = L.Conv2D(96, 11, strides=4, padding="same", activation="relu", name="conv1")(inputs)
        size = math.ceil(size / 4)
    else:
        x = L.Conv2D(64, 5, padding="same", activation="relu", name="conv1")(inputs)
    pools = _pools_for(size, 3, minimum=2)
    if pools >= 1:
        x = L.MaxPooling2D(3 if size >= 8 else 2, strides=2, padding="same", name="pool1")(x)
    x = L.Conv2D(192 if size >= 64 else 128, 5, padding="same", activation="relu", name="conv2")(x)
    if pools >= 2:
        x = L.MaxPooling2D(3 if size >= 16 else 2, strides=2, padding="same", name="pool2")(x)
    x = L.Conv2D(256, 3, padding="same", activation="relu", name="conv3")(x)
    x = L.Conv2D(256, 3, padding="same", activation="relu", name="conv4")(x)
    x = L.Conv2D(192, 3, padding="same", activation="relu", name="conv5")(x)
    if pools >= 3:
        x = L.MaxPooling2D(3 if size >= 32 else 2, strides=2, padding="same", name="pool5")(x)
    x = L.Flatten(name="flatten")(x)
    width = 4096 if size >= 128 else 512
    x = L.Dense(width, activation="relu", name="fc6")(x)
    x = L.Dropout(dropout, name="drop6")(x)
    x = L.Dense(width, activation="relu", name="fc7")(x)
    x = L.Dropout(dropout, name="drop7")(x)
    x = L.Dense(num_outputs, name="fc8")(x)
    outputs = L.Softmax(name="probabilities")(x)
    return keras.Model(inputs, outputs, name="alexnet")


def _inception(x, f1, f3r, f3, f5r, f5, fp, name):
    keras, L = _layers()
    b1 = L.Conv2D(f1, 1, activation="relu", name=f"{name}_1x1")(x)
    b3 = L.Conv2D(f3r, 1, activation="relu", name=f"{name}_3x3_reduce")(x)
    b3 = L.Conv2D(f3, 3, padding="same", activation="relu", name=f"{name}_3x3")(b3)
    b5 = L.Conv2D(f5r, 1, activation="relu", name=f"{name}_5x5_reduce")(x)
    b5 = L.Conv2D(f5, 5, padding="same", activation="relu", name=f"{name}_5x5")(b5)
    bp = L.MaxPooling2D(3, strides=1, padding="same", name=f"{name}_pool")(x)
    bp = L.Conv2D(fp, 1, activation="relu", name=f"{name}_pool_proj")(bp)
    return L.Concatenate(name=f"{name}_output")([b1, b3, b5, bp])


def googlenet(input_shape, num_outputs, dropout: float = 0.4, **_):
    """A GoogLeNet-style network: stem, inception modules 3a/3b/4a/4b, global average pooling."""
    keras, L = _layers()
    size = min(input_shape[0], input_shape[1])
    inputs = keras.Input(shape=tuple(input_shape), name="image")
    if size >= 128:
        x = L.Conv2D(64, 7, strides=2, padding="same", activation="relu", name="conv1")(inputs)
        x = L.MaxPooling2D(3, strides=2, padding="same", name="pool1")(x)
        size = math.ceil(size / 4)
    else:
        x = L.Conv2D(64, 3, padding="same", activation="relu", name="conv1")(inputs)
    x = L.Conv2D(192, 3, padding="same", activation="relu", name="conv2")(x)
    pools = _pools_for(size, 2, minimum=2)
    if pools >= 1:
        x = L.MaxPooling2D(3, strides=2, padding="same", name="pool2")(x)
    x = _inception(x, 64, 96, 128, 16, 32, 32, "inception_3a")
    x = _inception(x, 128, 128, 192, 32, 96, 64, "inception_3b")
    if pools >= 2:
        x = L.MaxPooling2D(3, strides=2, padding="same", name="pool3")(x)
    x = _inception(x, 192, 96, 208, 16, 48, 64, "inception_4a")
    x = _inception(x, 160, 112, 224, 24, 64, 64, "inception_4b")
    x = L.GlobalAveragePooling2D(name="avg_pool")(x)
    x = L.Dropout(dropout, name="dropout")(x)
    x = L.Dense(num_outputs, name="classifier")(x)
    outputs = L.Softmax(name="probabilities")(x)
    return keras.Model(inputs, outputs, name="googlenet")


def _pad_to_multiple(x, input_shape, multiple, L):
    h, w = input_shape[0], input_shape[1]
    ph, pw = (-h) % multiple, (-w) % multiple
    if ph or pw:
        x = L.ZeroPadding2D(((ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2)), name="pad")(x)
    return x, (ph, pw)


def _crop_back(x, pads, L):
    ph, pw = pads
    if ph or pw:
        x = L.Cropping2D(((ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2)), name="crop")(x)
    return x


#: Groups of ``norm="group"`` (fewer when a layer has fewer channels).
_GN_GROUPS = 8


def _norm_kind(norm: str, batchnorm: bool | None) -> str:
    """``"group"``, ``"batch"`` or ``"none"`` (``batchnorm=False/True``, the old parameter, still works)."""
    if batchnorm is not None:
        return "batch" if batchnorm else "none"
    if norm not in ("group", "batch", "none"):
        from ...errors import TrainingError

        raise TrainingError(f'network parameter norm must be "group", "batch" or "none", not "{norm}"')
    return norm


def _conv_bn_relu(x, filters, name, norm, L):
    x = L.Conv2D(filters, 3, padding="same", use_bias=norm == "none", name=name)(x)
    if norm == "batch":
        x = L.BatchNormalization(name=f"{name}_bn")(x)  # momentum: set by engine.batchnorm
    elif norm == "group":
        x = L.GroupNormalization(groups=min(_GN_GROUPS, filters), name=f"{name}_gn")(x)
    return L.Activation("relu", name=f"{name}_relu")(x)


def unet(
    input_shape,
    num_outputs,
    filters: int = 8,
    depth: int = 4,
    norm: str = "batch",
    batchnorm: bool | None = None,
    dropout: float = 0.0,
    **_,
):
    """A small U-Net (default segmentation network): ``depth`` levels of two 3x3 conv-norm-ReLU,
    doubling ``filters`` per level, transposed-conv upsampling with skip connections.

    ``norm``: ``"batch"`` (BatchNormalization, whose momentum the engine fits to the
    steps per epoch), ``"group"`` (GroupNormalization, 8 groups) or ``"none"``.

    ``dropout`` > 0 adds dropout after the bottom block and before the scoring layer (what MC-dropout
    samples when active learning scores candidates, :mod:`digits_core.labeling.strategies`).

    With the defaults (8 filters, depth 4) it has about 0.47 M parameters.
    """
    keras, L = _layers()
    depth = max(1, min(int(depth), _pools_for(min(input_shape[:2]), int(depth), minimum=2)))
    inputs = keras.Input(shape=tuple(input_shape), name="image")
    x, pads = _pad_to_multiple(inputs, input_shape, 2**depth, L)
    skips = []
    f = int(filters)
    bn = _norm_kind(norm, batchnorm)
    for level in range(depth):
        x = _conv_bn_relu(x, f * 2**level, f"down{level}_conv1", bn, L)
        x = _conv_bn_relu(x, f * 2**level, f"down{level}_conv2", bn, L)
        skips.append(x)
        x = L.MaxPooling2D(2, name=f"down{level}_pool")(x)
    x = _conv_bn_relu(x, f * 2**depth, "bottom_conv1", bn, L)
    x = _conv_bn_relu(x, f * 2**depth, "bottom_conv2", bn, L)
    if dropout:
        x = L.Dropout(float(dropout), name="bottom_dropout")(x)
    for level in reversed(range(depth)):
        x = L.Conv2DTranspose(f * 2**level, 2, strides=2, padding="same", name=f"up{level}_upconv")(x)
        x = L.Concatenate(name=f"up{level}_concat")([x, skips[level]])
        x = _conv_bn_relu(x, f * 2**level, f"up{level}_conv1", bn, L)
        x = _conv_bn_relu(x, f * 2**level, f"up{level}_conv2", bn, L)
    if dropout:
        x = L.Dropout(float(dropout), name="head_dropout")(x)
    x = L.Conv2D(num_outputs, 1, name="score")(x)
    x = _crop_back(x, pads, L)
    outputs = L.Softmax(axis=-1, name="probabilities")(x)
    return keras.Model(inputs, outputs, name="unet")


def fcn(input_shape, num_outputs, filters: int = 32, norm: str = "batch", **_):
    """A small FCN-8s-style network: three conv/pool stages, 1x1 scoring at strides 8/4/2,
    and learned 2x upsampling fused with each skip's scores.

    ``norm`` as for :func:`unet`: each 3x3 convolution is followed by BatchNormalization
    by default (without it the network needs several times the steps on small sets).
    """
    keras, L = _layers()
    norm = _norm_kind(norm, None)
    inputs = keras.Input(shape=tuple(input_shape), name="image")
    x, pads = _pad_to_multiple(inputs, input_shape, 8, L)
    f = int(filters)
    x = _conv_bn_relu(x, f, "conv1_1", norm, L)
    x = _conv_bn_relu(x, f, "conv1_2", norm, L)
    pool1 = L.MaxPooling2D(2, name="pool1")(x)
    x = _conv_bn_relu(pool1, 2 * f, "conv2_1", norm, L)
    x = _conv_bn_relu(x, 2 * f, "conv2_2", norm, L)
    pool2 = L.MaxPooling2D(2, name="pool2")(x)
    x = _conv_bn_relu(pool2, 4 * f, "conv3_1", norm, L)
    x = _conv_bn_relu(x, 4 * f, "conv3_2", norm, L)
    pool3 = L.MaxPooling2D(2, name="pool3")(x)
    x = _conv_bn_relu(pool3, 8 * f, "fc6", norm, L)
    x = L.Conv2D(8 * f, 1, activation="relu", name="fc7")(x)
    score8 = L.Conv2D(num_outputs, 1, name="score_fr")(x)
    up2 = L.Conv2DTranspose(num_outputs, 4, strides=2, padding="same", name="upscore2")(score8)
    score4 = L.Conv2D(num_outputs, 1, name="score_pool2")(pool2)
    fused = L.Add(name="fuse_pool2")([up2, score4])
    # one more skip, at stride 2, before the last 2x upsampling (was a single 4x one): thin shapes keep
    # their edges (val Dice 0.844 -> 0.891 on 48 train 32x32 shapes, 40 epochs; 60 fewer parameters)
    up4 = L.Conv2DTranspose(num_outputs, 4, strides=2, padding="same", name="upscore_pool2")(fused)
    score2 = L.Conv2D(num_outputs, 1, name="score_pool1")(pool1)
    fused = L.Add(name="fuse_pool1")([up4, score2])
    x = L.Conv2DTranspose(num_outputs, 4, strides=2, padding="same", name="upscore_pool1")(fused)
    x = _crop_back(x, pads, L)
    outputs = L.Softmax(axis=-1, name="probabilities")(x)
    return keras.Model(inputs, outputs, name="fcn")


#: The regression network pools down to at most this many pixels a side, then flattens (keeps the layout).
_REGRESSION_MAP = 8


def regression(input_shape, num_outputs, dropout: float = 0.0, **_):
    """A small CNN regressor (conv32-pool-conv64-pool[-conv64-pool...]-flatten-fc128-fc), linear ``output``.

    It pools until the map is at most 8 pixels a side and then *flattens*:
    targets that depend on where things are (a digit's identity, a position)
    need the layout that global average pooling throws away.
    """
    keras, L = _layers()
    inputs = keras.Input(shape=tuple(input_shape), name="image")
    size = max(input_shape[0], input_shape[1])
    wanted = max(2, math.ceil(math.log2(max(size, 1) / _REGRESSION_MAP)))
    pools = _pools_for(min(input_shape[0], input_shape[1]), wanted, minimum=1)
    x = L.Conv2D(32, 3, padding="same", activation="relu", name="conv1")(inputs)
    if pools >= 1:
        x = L.MaxPooling2D(2, name="pool1")(x)
    x = L.Conv2D(64, 3, padding="same", activation="relu", name="conv2")(x)
    for level in range(2, pools + 1):
        x = L.MaxPooling2D(2, name=f"pool{level}")(x)
        if level < pools:
            x = L.Conv2D(64, 3, padding="same", activation="relu", name=f"conv{level + 1}")(x)
    x = L.Flatten(name="flatten")(x)
    x = L.Dense(128, activation="relu", name="fc1")(x)
    if dropout:
        x = L.Dropout(dropout, name="drop1")(x)
    outputs = L.Dense(num_outputs, name="output")(x)
    return keras.Model(inputs, outputs, name="regression")


def image2image(input_shape, num_outputs, width=32, **_):
    """A small encoder-decoder for image-to-image (conv-pool-conv-upsample, skip connection), linear ``output``.

    The output has the input's H×W and ``num_outputs`` channels (the target
    images' channels); the input is added back through a 1×1 projection, so
    the network learns a residual (denoising, deblurring).
    """
    keras, L = _layers()
    inputs = keras.Input(shape=tuple(input_shape), name="image")
    x = L.Conv2D(width, 3, padding="same", activation="relu", name="conv1")(inputs)
    skip = x
    if min(input_shape[0], input_shape[1]) >= 2 and input_shape[0] % 2 == 0 and input_shape[1] % 2 == 0:
        x = L.MaxPooling2D(2, name="pool1")(x)
        x = L.Conv2D(2 * width, 3, padding="same", activation="relu", name="conv2")(x)
        x = L.UpSampling2D(2, interpolation="bilinear", name="up1")(x)
    x = L.Concatenate(name="skip1")([x, skip])
    x = L.Conv2D(width, 3, padding="same", activation="relu", name="conv3")(x)
    residual = L.Conv2D(num_outputs, 3, padding="same", name="residual")(x)
    projected = L.Conv2D(num_outputs, 1, name="input_projection")(inputs)
    outputs = L.Add(name="output")([projected, residual])
    return keras.Model(inputs, outputs, name="image2image")
