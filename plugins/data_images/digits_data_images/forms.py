"""Form fields and validators shared by the image plugins (DIGITS defaults)."""

from __future__ import annotations

import os

from wtforms import BooleanField, FileField, Form, IntegerField, SelectField, StringField, validators
from wtforms.validators import ValidationError

from digits_core import select_choices
from digits_core.errors import FormValidationError
from digits_core.paths import check_server_path

from .encoding import ENCODINGS
from .resize import RESIZE_MODES

IMAGE_TYPES = [("color", "Color (3 channels)"), ("grayscale", "Grayscale (1 channel)")]
RESIZE_CHOICES = [
    ("squash", "Squash"),
    ("crop", "Crop"),
    ("fill", "Fill (noise padding)"),
    ("half_crop", "Half crop, half fill"),
]
ENCODING_CHOICES = [
    ("png", "PNG (lossless)"),
    ("jpg", "JPEG (lossy)"),
    ("none", "None (raw pixels)"),
    ("passthrough", "Pass-through (keep original PNG/JPEG bytes when no resize is needed)"),
]
assert tuple(c for c, _ in RESIZE_CHOICES) == RESIZE_MODES
assert set(c for c, _ in ENCODING_CHOICES) == set(ENCODINGS)


def _under_data_roots(field) -> None:
    """On the web server, a path outside its data roots fails before anything is said about it."""
    try:
        check_server_path(str(field.data), field.name)
    except FormValidationError as exc:
        raise ValidationError(" ".join(exc.errors.get(field.name, [str(exc)]))) from None


def existing_folder(message: str = "folder"):
    """Validator: empty, or an existing folder (under the data roots on the web server)."""

    def check(form, field):
        if field.data:
            _under_data_roots(field)
        if field.data and not os.path.isdir(os.path.expanduser(str(field.data))):
            raise ValidationError(f"{message} {field.data} does not exist or is not a folder")

    return check


def class_folder_tree(message: str = "folder"):
    """Validator: empty, or a folder with class sub-folders of which at least one holds an image.

    Runs after :func:`existing_folder` on the same field (so the path is an
    allowed folder); refuses a flat folder of images, or class folders with
    no image, before a dataset job starts. Only folder names are read, up to
    the first image found.
    """

    def check(form, field):
        folder = os.path.expanduser(str(field.data or ""))
        if not folder or not os.path.isdir(folder):
            return  # empty, or already refused by existing_folder
        from . import listing

        classes = listing.class_folders(folder)
        if not classes:
            flat = sum(1 for entry in os.scandir(folder) if entry.is_file() and listing.is_image_name(entry.name))
            found = f"it holds {flat} image{'s' if flat != 1 else ''} directly" if flat else "it has no sub-folders"
            raise ValidationError(
                f"{message} {field.data} has no class sub-folders ({found}): put each class's "
                f"images in a sub-folder named after the class, e.g. {field.data}/cat/*.png"
            )
        from digits_core.paths import server_path_allowed

        for name in classes:
            real = os.path.realpath(os.path.join(folder, name))
            if not server_path_allowed(real):
                raise ValidationError(
                    f"{message} {field.data}: class folder {name} leads to {real}, outside the server's data roots"
                )
        if not any(_holds_an_image(os.path.join(folder, name)) for name in classes):
            raise ValidationError(
                f"{message} {field.data} has {len(classes)} sub-folder"
                f"{'s' if len(classes) != 1 else ''} ({', '.join(classes[:5])}"
                f"{', ...' if len(classes) > 5 else ''}) but no image in any of them "
                f"(image files end in {', '.join(_IMAGE_HINT)}, ...)"
            )

    return check


_IMAGE_HINT = (".png", ".jpg", ".jpeg", ".bmp")


def _holds_an_image(folder: str) -> bool:
    """True as soon as one image file is found under ``folder`` (recursively).

    On the web server, folders whose real location is outside the data roots
    (symlinks) are not looked into: the job refuses them with their name.
    """
    from digits_core.paths import server_path_allowed

    from .listing import is_image_name

    seen: set[str] = set()
    for root, dirs, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(root)
        if real in seen or not server_path_allowed(real):  # a symlink loop, or outside the roots
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        if any(is_image_name(name) for name in files):
            return True
    return False


def existing_file(message: str = "file"):
    """Validator: empty, or an existing file (under the data roots on the web server)."""

    def check(form, field):
        if field.data:
            _under_data_roots(field)
        if field.data and not os.path.isfile(os.path.expanduser(str(field.data))):
            raise ValidationError(f"{message} {field.data} does not exist or is not a file")

    return check


def form_defaults(form_class) -> dict:
    """Return each field's default value (what the form gives when a value is left out)."""
    return {
        field.name: field.default
        for field in form_class(meta={"csrf": False})
        if field.type not in ("SubmitField", "CSRFTokenField")
    }


def fill_defaults(plugin) -> None:
    """Give a plugin instance its dataset form's default for every option it was not given (``None``)."""
    for key, value in form_defaults(plugin.get_dataset_form()).items():
        if getattr(plugin, key, None) is None:
            setattr(plugin, key, value)


def expand(path):
    """Return ``path`` with ``~`` expanded, or ``None`` when empty."""
    return os.path.abspath(os.path.expanduser(str(path))) if path else None


#: Names of the fields :func:`image_option_fields` returns, in order.
IMAGE_OPTION_FIELDS = ("image_type", "width", "height", "resize_mode", "encoding", "jpg_quality", "seed")


#: Width and height when the form does not say (and, with ``keep_source_size``, the images differ in size).
DEFAULT_IMAGE_SIZE = 256


def _size_field(label: str, keep_source_size: bool) -> IntegerField:
    what = label.lower()
    if not keep_source_size:
        return IntegerField(
            label,
            default=DEFAULT_IMAGE_SIZE,
            validators=[validators.InputRequired(), validators.NumberRange(1, 16384)],
            description=f"Image {what} in pixels after resizing",
        )
    return IntegerField(
        label,
        default=None,
        validators=[validators.Optional(), validators.NumberRange(1, 16384)],
        description=f"Image {what} in pixels after resizing. Empty: the source {what} when all "
        f"images share one size (no resizing), else {DEFAULT_IMAGE_SIZE}",
    )


def image_option_fields(keep_source_size: bool = False) -> tuple:
    """Return new (unbound) fields for image type, size, resize mode, encoding and seed.

    A form class unpacks them into :data:`IMAGE_OPTION_FIELDS` after its own
    fields, so they come after the data-source fields on the page and in
    ``--help``.

    Args:
        keep_source_size: Width and height default to empty, which the plugin
            resolves to the source size when all images share one (see
            :func:`shared_image_size`), else :data:`DEFAULT_IMAGE_SIZE`.
    """
    return (
        SelectField(
            "Image type",
            choices=select_choices(IMAGE_TYPES),
            default="color",
            description="Color images have 3 channels (RGB), grayscale 1. 16-bit grayscale PNGs are kept as 16-bit",
        ),
        _size_field("Width", keep_source_size),
        _size_field("Height", keep_source_size),
        SelectField(
            "Resize mode",
            choices=select_choices(RESIZE_CHOICES),
            default="squash",
            description="How images of another size or aspect ratio are resized (DIGITS modes)",
        ),
        SelectField(
            "Image encoding",
            choices=select_choices(ENCODING_CHOICES),
            default="png",
            description="How images are stored in the database",
        ),
        IntegerField(
            "JPEG quality",
            default=90,
            validators=[validators.NumberRange(1, 100)],
            description="Quality of JPEG encoding (1-100)",
        ),
        IntegerField(
            "Random seed",
            default=0,
            validators=[validators.InputRequired()],
            description="Seeds the split, the shuffle and fill noise, so a rebuild gives the same dataset",
        ),
    )


def shared_image_size(paths) -> tuple[int, int] | None:
    """Return ``(width, height)`` when every image of ``paths`` has that size, else ``None``.

    Reads image headers only (no pixels); an unreadable image gives ``None``
    (the encoder names it later).
    """
    from PIL import Image

    sizes = set()
    for path in paths:
        try:
            with Image.open(path) as image:
                sizes.add(image.size)
        except OSError:
            return None
        if len(sizes) > 1:
            return None
    return sizes.pop() if sizes else None


class ImageSizeForm(Form):
    """A form with only the image option fields (for plugins that subclass it)."""

    image_type, width, height, resize_mode, encoding, jpg_quality, seed = image_option_fields()


class InferenceForm(Form):
    """Inputs for inference: one image (path or upload), or many (folder or list)."""

    image_path = StringField("Image path", description="Path of one image file", validators=[existing_file("image")])
    image_file = FileField("Upload image", description="An image file to upload")
    image_folder = StringField(
        "Image folder", description="Classify every image in this folder", validators=[existing_folder("image folder")]
    )
    image_list = StringField(
        "Image list", description="A file with one image path per line", validators=[existing_file("image list")]
    )
    list_root = StringField(
        "List root folder",
        description="Folder relative paths in the image list start from",
        validators=[existing_folder("list root folder")],
    )
    show_labels = BooleanField(
        "Labels in list",
        default=False,
        description="The image list also has a label per line, the ground truth: a class id, "
        "or a mask image (segmentation) or KITTI label file (detection)",
    )

    def validate_image_path(form, field):
        given = [f for f in (form.image_path, form.image_folder, form.image_list) if f.data]
        upload = form.image_file.data
        if not given and not (upload and not isinstance(upload, str)) and not (isinstance(upload, str) and upload):
            raise ValidationError("give an image path, an uploaded image, an image folder or an image list")
