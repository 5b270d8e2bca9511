"""What the two image plugins share: form defaults, channels, uploads and the inference form."""

from __future__ import annotations

from digits_core import DataIngestion

from .forms import InferenceForm, fill_defaults
from .inference import inference_entries, prepare_upload


class ImageIngestionBase(DataIngestion):
    """Base of :class:`ImageClassificationIngestion` and :class:`ImageSegmentationIngestion`.

    Fills options missing from ``form_data`` with the dataset form's
    defaults (so the API can pass only what it changes), sets ``channels``
    from ``image_type``, and reads an uploaded inference image into memory.
    """

    def __init__(self, is_inference_db: bool = False, **form_data):
        super().__init__(is_inference_db=is_inference_db, **form_data)
        fill_defaults(self)
        self.channels = 1 if self.image_type == "grayscale" else 3
        self._split: dict[str, list] | None = None
        if is_inference_db:
            prepare_upload(self)

    inference_form = InferenceForm
    inference_template = "templates/inference.html"

    @staticmethod
    def image_form_template(name: str, form):
        """Return ``templates/<name>.html`` with the shared image and storage fieldsets in place of
        its ``{# image options #}`` line (``templates/image_options.html``)."""
        source, context = DataIngestion.template_from_package("digits_data_images", f"templates/{name}.html", form=form)
        shared, _ = DataIngestion.template_from_package("digits_data_images", "templates/image_options.html", form=form)
        return source.replace("{# image options #}", shared.rstrip("\n")), context

    def itemize_entries(self, stage: str) -> list:
        """Return the entries of ``stage``, split once for all stages.

        Classification entries are ``(image path, class id)``, segmentation
        entries ``(image path, label path)``; for inference
        (``is_inference_db``), the images of the inference form for ``"test"``.
        """
        if self.is_inference_db:
            return inference_entries(self, stage)
        if self._split is None:
            self._split = self._build_split()
        return self._split.get(stage, [])

    def _build_split(self) -> dict[str, list]:
        """Return ``{stage: entries}`` for every stage (the subclass lists its sources)."""
        raise NotImplementedError
