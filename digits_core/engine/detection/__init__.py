"""Object detection on the shared engine: target encoding, the ``detectnet`` network, its loss and
in-graph decoding. Box geometry, KITTI labels and mAP live below the plugin layer, in :mod:`digits_core.boxes`.
"""
