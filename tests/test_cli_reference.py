"""Every flag of every ``digits`` command is documented: docs/cli.md's reference is generated from the parsers."""

from __future__ import annotations

import argparse

from digits_core.cli import reference


def test_page_block_matches_the_parsers():
    assert reference.PAGE.name == "cli.md" and reference.PAGE.parent.name == "docs"
    text = reference.PAGE.read_text(encoding="utf-8")
    assert reference.replace_block(text, reference.markdown()) == text, (
        "docs/cli.md's command-line reference is out of date: run python -m digits_core.cli.reference --write"
    )


def test_every_flag_is_listed_with_help_text():
    table = reference.flag_table()
    listed = {path: " ".join(flags for flags, _ in rows) for path, rows in table.items()}
    for path, parser in reference.commands():
        for action in reference._own_actions(parser):
            for option in action.option_strings:
                assert f"`{option}" in listed[path], (path, option)
    undocumented = [(path, flags) for path, rows in table.items() for flags, text in rows if not text.strip()]
    assert not undocumented, f"flags without help text: {undocumented}"
    for flag in ("--errors", "--debug", "--batch-size", "--points", "--lr", "--json"):
        assert any(flag in flags for rows in table.values() for flags, _ in rows), flag


def test_a_new_undocumented_flag_fails_the_check(tmp_path, monkeypatch):
    readme = tmp_path / "cli.md"
    readme.write_text("x\n" + reference.markdown() + "\ny\n", encoding="utf-8")
    assert reference.main(["--check", "--readme", str(readme)]) == 0
    original = reference.commands

    def with_extra():
        found = original()
        parser = argparse.ArgumentParser()
        parser.add_argument("--brand-new", help="a flag nobody documented")
        return found + [("digits brand-new", parser)]

    monkeypatch.setattr(reference, "commands", with_extra)
    assert reference.main(["--check", "--readme", str(readme)]) == 1
    assert "--brand-new" in reference.markdown()
