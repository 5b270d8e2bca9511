"""Bounding boxes, below the plugin layer: where a box lands when its image is resized
(:mod:`.geometry`), KITTI label files (:mod:`.kitti`) and detection matching and mAP (:mod:`.evaluate`).

numpy only (no TensorFlow): detection data plugins and views use them through the plugin API
(``digits_core.resize_geometry``, ``digits_core.read_kitti_labels``, ``digits_core.evaluate_detections``, ...),
the detection task and inference import them directly. Their former names under
``digits_core.engine.detection`` still import, with a warning, until plugin API 2.0.
"""
