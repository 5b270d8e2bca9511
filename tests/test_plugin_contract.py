"""Every bundled plugin honours the public contract, and rendering its forms stays light."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

BUNDLED_DATA = ["image-classification", "image-segmentation", "image-sunnybrook"]
BUNDLED_VIEWS = ["image-classification", "image-segmentation"]


def test_rendering_every_bundled_form_does_not_import_tensorflow():
    """Render each bundled plugin's dataset, inference and config forms in a fresh interpreter."""
    code = textwrap.dedent(
        f"""
        import sys
        from digits_core import registry
        from digits_core.forms import bind_form

        from digits_core.templating import plugin_environment
        env = plugin_environment()
        rendered = {{}}

        def render(pair, form):
            source, context = pair
            if source is None:
                return ""
            return env.from_string(source).render({{"form": form, **(context or {{}})}})

        for plugin_id in {BUNDLED_DATA!r}:
            cls = registry.get_data_ingestion(plugin_id)
            form = bind_form(cls.get_dataset_form(), meta={{"csrf": False}})
            html = render(cls.get_dataset_template(form), form)
            assert "<input" in html or "<select" in html, (plugin_id, html[:200])
            inference_form_class = cls.get_inference_form()
            if inference_form_class is not None:
                form = bind_form(inference_form_class, meta={{"csrf": False}})
                render(cls.get_inference_template(form), form)
            rendered[plugin_id] = len(html)

        for view_id in {BUNDLED_VIEWS!r}:
            cls = registry.get_view(view_id)
            config_form_class = cls.get_config_form()
            if config_form_class is not None:
                form = bind_form(config_form_class, meta={{"csrf": False}})
                render(cls.get_config_template(form), form)

        heavy = [m for m in ("tensorflow", "keras") if m in sys.modules]
        assert not heavy, heavy
        print("ok", sorted(rendered))
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("ok")


@pytest.mark.parametrize("plugin_id", BUNDLED_DATA)
def test_bundled_data_plugins_document_their_interface(plugin_id):
    from digits_core import DataIngestion, registry

    cls = registry.get_data_ingestion(plugin_id)
    assert issubclass(cls, DataIngestion)
    assert cls.__doc__ and cls.get_title() != cls.get_id()
    assert cls.get_category() == "Images"
    for name in ("itemize_entries", "encode_entry", "get_dataset_form", "get_dataset_template"):
        assert getattr(cls, name).__doc__, f"{plugin_id}.{name} has no docstring"


@pytest.mark.parametrize("view_id", BUNDLED_VIEWS)
def test_bundled_views_ship_static_files(view_id):
    from digits_core import View, registry

    cls = registry.get_view(view_id)
    assert issubclass(cls, View)
    folder = cls.get_static_folder()
    assert folder is not None and folder.is_dir()
    for name in cls.stylesheets:
        assert (folder / name).is_file(), f"{view_id} lists stylesheet {name} that it does not ship"


def test_plugin_templates_can_import_the_helper_macros_everywhere():
    """The same plugin template renders in HTML reports (no Flask) as on the web page."""
    from wtforms import Form, StringField

    from digits_core.templating import render_plugin_template

    class PathForm(Form):
        path = StringField("DICOM file", description="A .dcm file")

    form = PathForm(data={"path": "<b>x.dcm</b>"})
    html = render_plugin_template(
        '{% from "helper.html" import render_field %}{{ render_field(form.path) }}', {"form": form}
    )
    assert 'name="path"' in html and "A .dcm file" in html
    assert "<b>x.dcm</b>" not in html and "&lt;b&gt;x.dcm&lt;/b&gt;" in html
