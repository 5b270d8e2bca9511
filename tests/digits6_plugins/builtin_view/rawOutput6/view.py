from __future__ import absolute_import

import os

from digits.utils import subclass, override
from ..interface import VisualizationInterface

VIEW_TEMPLATE = "templates/view_template.html"


@subclass
class Visualization(VisualizationInterface):
    """
    Shows the raw network output
    """

    def __init__(self, dataset, **kwargs):
        extension_dir = os.path.dirname(os.path.abspath(__file__))
        self.view_template = open(os.path.join(extension_dir, VIEW_TEMPLATE), "r").read()

    @staticmethod
    def get_id():
        return 'raw-output6'

    @staticmethod
    def get_title():
        return 'Raw output (DIGITS 6 built-in)'

    @override
    def get_view_template(self, data):
        return self.view_template, data

    @override
    def process_data(self, input_id, input_data, output_data):
        return {'outputs': dict((name, value.ravel()[:8].tolist()) for name, value in output_data.items()),
                'shapes': dict((name, list(value.shape)) for name, value in output_data.items())}
