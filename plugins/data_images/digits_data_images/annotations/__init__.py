"""Annotation formats users label in: COCO, Pascal VOC, YOLO, CVAT for images 1.1 and Label Studio.

Each reader turns one format into :class:`~.model.Parsed` (class names in the
file's order, the annotations of each image by the name the file gives it,
and the problems met, each naming file and line or record). The image plugins
(:mod:`digits_data_images.detection`, :mod:`digits_data_images.segmentation`)
match those names against the images of the form's image folder, so no path
written inside an annotation file is ever opened; the label files found next
to images go through the data-root gate (:func:`digits_core.paths.resolve_in_roots`).
"""

#: The formats a dataset form offers (``auto`` detects one of the others and logs why).
FORMATS = ("auto", "kitti", "coco", "voc", "yolo", "cvat", "labelstudio")
#: Formats whose annotations are one file per stage (the others: a folder of label files).
FILE_FORMATS = ("coco", "cvat", "labelstudio")
