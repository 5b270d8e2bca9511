from __future__ import absolute_import

import numpy as np
import os
import PIL.Image
import PIL.ImageDraw

import digits
from digits.utils import subclass, override
from digits.extensions.view.interface import VisualizationInterface
from .forms import ConfigForm


CONFIG_TEMPLATE = "templates/config_template.html"
VIEW_TEMPLATE = "templates/view_template.html"

COLORS = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255)}


@subclass
class Visualization(VisualizationInterface):
    """
    Draws the predicted gradient as an arrow over the input image
    """

    def __init__(self, dataset, **kwargs):
        if kwargs['arrow_color'] not in COLORS:
            raise ValueError("unknown color: %s" % kwargs['arrow_color'])
        self.color = COLORS[kwargs['arrow_color']]
        self.arrow_size = float(kwargs['arrow_size'])

        # image dimensions (HWC)
        dims = dataset.get_feature_dims()
        self.height = dims[0]
        self.width = dims[1]

        extension_dir = os.path.dirname(os.path.abspath(__file__))
        self.view_template = open(os.path.join(extension_dir, VIEW_TEMPLATE), "r").read()

    @staticmethod
    def get_config_form():
        return ConfigForm()

    @staticmethod
    def get_config_template(form):
        extension_dir = os.path.dirname(os.path.abspath(__file__))
        template = open(os.path.join(extension_dir, CONFIG_TEMPLATE), "r").read()
        context = {'form': form}
        return (template, context)

    @staticmethod
    def get_id():
        return "gradients6"

    @staticmethod
    def get_title():
        return "Gradient arrows (DIGITS 6)"

    @override
    def get_view_template(self, data):
        return self.view_template, {'gradients': data['gradients'], 'image': data['image']}

    @override
    def process_data(self, input_id, input_data, output_data):
        # a single output; a grayscale input comes as HxW
        output_vector = output_data[output_data.keys()[0]]
        grad = np.array([output_vector[0] * self.width, output_vector[1] * self.height])
        center = np.array([self.width / 2.0, self.height / 2.0])
        arrow = grad * (self.arrow_size / 100.0)
        tip = center + arrow / 2
        tail = center - arrow / 2

        image = PIL.Image.fromarray(input_data).convert('RGB')
        draw = PIL.ImageDraw.Draw(image)
        draw.line((tail[0], tail[1], tip[0], tip[1]), fill=self.color)
        draw.ellipse((tip[0] - 1, tip[1] - 1, tip[0] + 1, tip[1] + 1), fill=self.color)

        return {'image': digits.utils.image.embed_image_html(image),
                'gradients': [float(output_vector[0]), float(output_vector[1])]}
