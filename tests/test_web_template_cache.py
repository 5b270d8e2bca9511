"""Page templates compiled once per process and shared by every web app (digits_core.web.template_cache)."""

from __future__ import annotations

import jinja2

from digits_core.web import create_app
from digits_core.web.template_cache import SHARED_BYTECODE_CACHE, ProcessBytecodeCache


def _counting_environment(cache, templates, compiled):
    class Counting(jinja2.Environment):
        def compile(self, source, name=None, filename=None, raw=False, defer_init=False):
            compiled.append(name)
            return super().compile(source, name, filename, raw, defer_init)

    return Counting(loader=jinja2.DictLoader(templates), bytecode_cache=cache, autoescape=True)


def test_a_second_environment_loads_what_the_first_compiled_and_an_edited_template_is_compiled_again():
    cache, compiled = ProcessBytecodeCache(), []
    templates = {"page.html": "<p>{{ who }}</p>"}
    first = _counting_environment(cache, templates, compiled)
    assert first.get_template("page.html").render(who="<a>") == "<p>&lt;a&gt;</p>"
    assert compiled == ["page.html"]

    second = _counting_environment(cache, templates, compiled)
    assert second.get_template("page.html").render(who="b") == "<p>b</p>"
    assert compiled == ["page.html"]  # loaded, not compiled

    edited = _counting_environment(cache, {"page.html": "<h1>{{ who }}</h1>"}, compiled)
    assert edited.get_template("page.html").render(who="c") == "<h1>c</h1>"  # the checksum differs: compiled anew
    assert compiled == ["page.html", "page.html"]

    cache.clear()
    _counting_environment(cache, templates, compiled).get_template("page.html")
    assert len(compiled) == 3


def test_every_app_renders_its_pages_through_the_shared_cache(tmp_path):
    apps = [create_app(tmp_path / f"jobs{i}", start_scheduler=False, testing=True) for i in range(2)]
    assert all(app.jinja_env.bytecode_cache is SHARED_BYTECODE_CACHE for app in apps)
    pages = [app.test_client().get("/") for app in apps]
    assert [page.status_code for page in pages] == [200, 200]
    assert pages[0].data.count(b"<html") == pages[1].data.count(b"<html") == 1
