"""The :class:`DataIngestion` interface: turn any source into a DIGITS dataset."""

from __future__ import annotations

import abc
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, ClassVar

from ..errors import DigitsError
from .base import PluginBase, form_getter, form_template_getter, install_attribute_getters

TRAIN = "train"
VAL = "val"
TEST = "test"
#: The stages a dataset can have, in the order they are built.
STAGES = (TRAIN, VAL, TEST)


class CapabilityNotSupportedError(DigitsError):
    """A data plugin was asked for an optional capability it does not have (the message names both)."""


class DataIngestion(PluginBase, abc.ABC):
    """Base class of data plugins (entry-point group ``digits.plugins.data``).

    A data plugin describes its options with a WTForms form, lists the
    entries of each stage, and encodes one entry into numpy arrays. The core
    does everything else: validating the form (the same form serves the web
    page, the ``digits dataset create`` options and the Python API),
    running :meth:`encode_entry` in parallel worker processes, writing the
    LMDB files, the mean image and ``dataset.json``, and publishing the
    dataset atomically.

    Lifecycle of a dataset job:

    1. The form returned by :meth:`get_dataset_form` validates the user's
       values; the plugin is created as ``cls(**form.data)``.
    2. In the parent process, :meth:`itemize_entries` is called once per
       stage (``"train"``, ``"val"``, ``"test"``). It may add keys to
       :attr:`userdata` (for example ``class_labels``); userdata is saved
       after all stages are itemized.
    3. The instance is pickled to worker processes, which call
       :meth:`encode_entry` on each entry, in any order. Keep instances
       picklable: store paths and settings, not open files.

    For inference the core creates
    ``cls(is_inference_db=True, **dataset_userdata, **inference_values)``:
    the userdata saved with the dataset (without the keys the framework
    owns, see below) overridden by the validated values of
    :meth:`get_inference_form`. It calls ``itemize_entries("test")`` and
    encodes each entry the same way; an entry whose ``encode_entry`` raises
    is skipped and reported (up to ``--max-errors``) while the others get
    results, and each result is named by its entry's ``str()`` (``#k``
    appended when ``encode_entry`` returns a list of pairs, e.g. frames).

    Reserved names: ``is_inference_db``, ``userdata`` and every public
    attribute or method of this class may not be form fields (the plugin is
    reported ``failed`` at load) nor persisted userdata keys (they are
    dropped, with a :mod:`digits_core.deprecated` warning, when the plugin
    is re-created).

    Data contract of :meth:`encode_entry`:

    * **feature**: numpy array of shape ``H×W×C`` (an ``H×W`` array is taken
      as ``C=1``) with dtype ``uint8``, ``uint16``, ``int16`` or
      ``float32``. It is stored bit-exactly: no rescaling, no cast.
    * **label**: an ``int`` class index (classification), a ``float`` or 1-D
      float array (regression), an ``H×W`` integer array of class indices
      (segmentation), a float32 ``N×5`` array of boxes ``(class_id, x_min,
      y_min, x_max, y_max)`` (detection) or an ``H×W×C`` float array, e.g. a
      target image scaled to ``[0, 1]`` (image-to-image).

    **Label kind**: declare it in :attr:`label_kind` (``"class"``,
    ``"regression"`` or ``"vector"``, ``"mask"``, ``"boxes"``, ``"image"``,
    ``"raw"``); a label that contradicts it is refused, naming the kind. It
    is never guessed from an array's shape: a plugin that declares none gets
    the kind of its label's type (``int`` → class, ``float`` or 1-D float
    array → regression, integer ``H×W`` array → mask) and any other array
    stored as ``raw``, with its shape.

    Userdata keys that views and the training engine rely on:

    * ``class_labels``: list of class names, index = class id.
    * ``color_palette``: list of ``[r, g, b]`` (0–255), index = class id.

    Attributes:
        label_kind: The kind of every label :meth:`encode_entry` returns, or
            ``None`` (see "Label kind" above). A class attribute, or a
            property when a form option chooses it.
        is_inference_db: True when the instance encodes inference inputs.
        userdata: The validated form data (JSON-serializable), persisted
            with the dataset; each key is also set as an attribute.
    """

    label_kind: str | None = None
    #: The dataset form class; setting it gives :meth:`get_dataset_form` (DIGITS 6 getters keep working).
    dataset_form: ClassVar[Any] = None
    #: The dataset form's template, a path in the plugin's package; gives :meth:`get_dataset_template`.
    dataset_template: ClassVar[str | None] = None
    #: The inference form class; gives :meth:`get_inference_form`.
    inference_form: ClassVar[Any] = None
    #: The inference form's template, a path in the plugin's package; gives :meth:`get_inference_template`.
    inference_template: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        install_attribute_getters(
            cls,
            {
                "dataset_form": ("get_dataset_form", lambda _cls, form: form_getter(form)),
                "dataset_template": ("get_dataset_template", form_template_getter),
                "inference_form": ("get_inference_form", lambda _cls, form: form_getter(form)),
                "inference_template": ("get_inference_template", form_template_getter),
            },
        )

    def __init__(self, is_inference_db: bool = False, **form_data: Any):
        self.is_inference_db = is_inference_db
        self.userdata: dict[str, Any] = dict(form_data)
        for key, value in form_data.items():
            setattr(self, key, value)

    # -- forms and templates -------------------------------------------------

    @staticmethod
    @abc.abstractmethod
    def get_dataset_form() -> Any:
        """Return the WTForms ``Form`` class of the dataset options (a form instance is accepted too).

        Field names become ``--field-name`` options of ``digits dataset
        create``; labels and descriptions become their help text. Put
        cross-field checks in the form's ``validate_<field>`` methods so
        every front door gets them.
        """

    @staticmethod
    @abc.abstractmethod
    def get_dataset_template(form: Any) -> tuple[str, dict]:
        """Return ``(jinja_source, context)`` that lays out the dataset form.

        The template is rendered inside the web UI's page with ``form`` in
        its context (plus the returned ``context``). It is rendered with
        autoescaping on.

        Args:
            form: A bound instance of the :meth:`get_dataset_form` class.
        """

    @staticmethod
    def get_inference_form() -> Any:
        """Return the WTForms ``Form`` class (or an instance) for inference inputs, or ``None``.

        ``None`` (the default) means the plugin has no inference input of
        its own and the core's generic image inputs are used. It may also be
        an instance method (the DIGITS 6 habit): the core then calls it on
        ``cls(is_inference_db=True, **dataset_userdata)``.
        """
        return None

    @staticmethod
    def get_inference_template(form: Any) -> tuple[str | None, dict | None]:
        """Return ``(jinja_source, context)`` laying out the inference form, or ``(None, None)``.

        Args:
            form: A bound instance of the :meth:`get_inference_form` class.
        """
        return None, None

    # -- data ----------------------------------------------------------------

    @abc.abstractmethod
    def itemize_entries(self, stage: str) -> Sequence[Hashable]:
        """Return the entries of one stage.

        Called once per stage, in the parent process, before any encoding.
        Return an empty list for a stage the dataset does not have. Entries
        are handed to :meth:`encode_entry` in worker processes, so they must
        be picklable (paths, tuples, small dicts); they also appear in the
        errors report, so make their ``str()`` meaningful.

        Args:
            stage: ``"train"``, ``"val"`` or ``"test"``.

        Returns:
            The entries, in the order their records are written.
        """

    @abc.abstractmethod
    def encode_entry(self, entry: Any) -> Any:
        """Encode one entry into ``(feature, label)``, or a list of such pairs.

        Called in a worker process, in any order. Raise an exception with a
        message naming the file to skip this entry; it is recorded in the
        dataset's errors report and the job goes on.

        Args:
            entry: One item returned by :meth:`itemize_entries`.

        Returns:
            ``(feature, label)`` or a list of pairs (e.g. one per frame),
            following the data contract in the class docstring.
        """

    def userdata_to_store(self, job_path: Any) -> dict[str, Any]:
        """Return the userdata to save in ``dataset.json`` (JSON only); called once, after itemizing.

        The default is :attr:`userdata` itself: the core's plugins keep it
        JSON. The DIGITS 6 adapter overrides it to pickle the values JSON
        cannot hold (DIGITS 6 pickled the whole job) into the job folder
        ``job_path``.
        """
        return self.userdata

    # -- after inference ----------------------------------------------------------

    def finish_inference(self, samples: Sequence[Any]) -> str | None:
        """Called once after an inference that used this plugin's inference form; optional.

        Lets a source write results back where its inputs came from (the
        ``dicomweb-segmentation`` plugin stores the predicted masks in the
        PACS as DICOM-SEG). Runs in the process that ran the inference, on
        the same instance that itemized and encoded the inputs, with the
        samples of the inputs that were not skipped. The default does
        nothing. Added in plugin API 1.1.

        Args:
            samples: :class:`~digits_core.inference.runner.InferenceSample` objects
                (``input_id`` is ``str(entry)``; ``output`` the network output).

        Returns:
            A one-line message for the user (shown by the CLI, the web page
            and in ``InferenceResult.notes``), or ``None``.
        """
        return None

    # -- active-learning pools (plugin API 1.3) -------------------------------------

    @classmethod
    def pool_candidates(cls, pool_source: Mapping[str, Any]) -> dict[str, Any]:
        """List the unlabelled images an active-learning pool source names; optional (plugin API 1.3).

        ``digits label pool --dicomweb`` and ``POST /api/pools`` call it on the class with the pool's
        ``source`` (``{"kind", "plugin", ...}``: the server and filters the plugin understands; never a
        secret). A plugin that implements it implements :meth:`pool_image` and :meth:`pool_store_proposal`
        too. The default raises :class:`CapabilityNotSupportedError`.

        Returns:
            ``{"candidates": [source entry, ...], "modality": str or None, "skipped": [reason, ...]}``:
            one JSON entry per image (stored as the candidate's ``source``), the images' modality, and
            what was left out and why; optionally ``"dimensions": 3`` when each candidate is a volume (then
            :meth:`pool_image` returns and :meth:`pool_store_proposal` takes a ``D x H x W`` slice stack), and
            further counts kept in the pool record's ``listing`` (e.g. ``"seg_reads"``).

        Raises:
            CapabilityNotSupportedError: This plugin cannot list pool candidates.
            DigitsError: The source is unreachable or names something that is not an image (named).
        """
        raise CapabilityNotSupportedError(f"The data plugin {cls.__name__} cannot list active-learning pools.")

    @classmethod
    def pool_image(cls, pool_source: Mapping[str, Any], candidate: Mapping[str, Any]) -> Any:
        """A pool candidate's image (``H x W x C`` numpy array, values as stored); optional (plugin API 1.3).

        Args:
            pool_source: The pool's ``source``.
            candidate: The candidate's ``source`` entry (as :meth:`pool_candidates` listed it).

        Raises:
            CapabilityNotSupportedError: The default.
            DigitsError: The image cannot be read (named).
        """
        raise CapabilityNotSupportedError(f"The data plugin {cls.__name__} cannot read pool candidates.")

    @classmethod
    def pool_store_proposal(
        cls,
        pool_source: Mapping[str, Any],
        candidate: Mapping[str, Any],
        mask: Any,
        class_labels: list[str],
        *,
        model_id: str,
    ) -> dict[str, Any]:
        """Store a model's proposal (``H x W`` uint8 class indices) where the source keeps labels; optional (1.3).

        Returns:
            Where it is (JSON, recorded as the candidate's ``proposal``).

        Raises:
            CapabilityNotSupportedError: The default.
            DigitsError: It could not be stored (named).
        """
        raise CapabilityNotSupportedError(f"The data plugin {cls.__name__} cannot store pool proposals.")
