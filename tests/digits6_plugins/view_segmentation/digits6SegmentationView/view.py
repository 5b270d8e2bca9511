# Written as DIGITS 6's imageSegmentation view is (C×H×W scores, a flat 256-colour palette,
# Python 2 dicts in templates, an inline script, AngularJS blocks), with the mechanical Python 3 fixes only.
from __future__ import absolute_import

import os

import numpy as np

import digits
from digits.utils import subclass, override
from digits.utils.constants import COLOR_PALETTE_ATTRIBUTE
from digits.extensions.view.interface import VisualizationInterface
from .forms import ConfigForm

CONFIG_TEMPLATE = "templates/config_template.html"
HEADER_TEMPLATE = "templates/header_template.html"
VIEW_TEMPLATE = "templates/view_template.html"


@subclass
class Visualization(VisualizationInterface):
    """
    Draws the top class of each pixel over the input, in the dataset's colours
    """

    def __init__(self, dataset, **kwargs):
        extension_dir = os.path.dirname(os.path.abspath(__file__))
        self.view_template = open(os.path.join(extension_dir, VIEW_TEMPLATE), "r").read()
        if COLOR_PALETTE_ATTRIBUTE not in dataset.extension_userdata:
            raise ValueError("Palette not found in dataset")
        palette = dataset.extension_userdata[COLOR_PALETTE_ATTRIBUTE]
        # assume 8-bit RGB palette and convert to N*3 numpy array
        self.palette = np.array(palette).reshape((len(palette) // 3, 3))
        self.class_labels = dataset.extension_userdata.get('class_labels')
        self.opacity = int(kwargs['opacity'])
        self.found_classes = {}
        self.count = 0

    @staticmethod
    def get_config_form():
        return ConfigForm()

    @staticmethod
    def get_config_template(form):
        extension_dir = os.path.dirname(os.path.abspath(__file__))
        template = open(os.path.join(extension_dir, CONFIG_TEMPLATE), "r").read()
        return (template, {'form': form})

    @override
    def get_header_template(self):
        extension_dir = os.path.dirname(os.path.abspath(__file__))
        template = open(os.path.join(extension_dir, HEADER_TEMPLATE), "r").read()
        legend = {}
        for c in sorted(self.found_classes):
            name = self.class_labels[c] if self.class_labels else "Class #%d" % c
            legend[name] = '#%02x%02x%02x' % tuple(self.palette[c])
        return template, {'legend': legend}

    @staticmethod
    def get_id():
        return 'segmentation6'

    @staticmethod
    def get_title():
        return 'Segmentation (DIGITS 6)'

    @override
    def get_view_template(self, data):
        return self.view_template, data

    @override
    def process_data(self, input_id, input_data, output_data):
        # assume the only output is a CHW image where C is the number
        # of classes, H and W are the height and width of the image
        data = output_data[output_data.keys()[0]].astype('float32')
        # retain only the top class for each pixel
        class_data = np.argmax(data, axis=0)
        counts = {}
        for c in np.unique(class_data):
            self.found_classes[int(c)] = True
            name = self.class_labels[c] if self.class_labels else "Class #%d" % c
            counts[name] = int((class_data == c).sum())
        seg = self.palette[class_data].astype('uint8')
        self.count += 1
        return {
            'index': self.count,
            'input_image': digits.utils.image.embed_image_html(input_data),
            'seg_image': digits.utils.image.embed_image_html(seg),
            'class_data': class_data.tolist(),
            'counts': counts,
            'opacity': self.opacity / 100.0,
        }
