"""Object detection on the shared engine: box geometry, target encoding, the ``detectnet`` network,
its loss, in-graph decoding and mAP.

Light modules (no TensorFlow at import): :mod:`.geometry`, :mod:`.evaluate`.
"""
