"""Parsing XML from users: no DTD, no entity declarations (so no entity expansion), ever."""

from __future__ import annotations

import xml.etree.ElementTree as ET
import xml.parsers.expat

#: Largest annotation XML read (bytes): a bound on what a hostile file can make us hold.
MAX_XML_BYTES = 256 * 1024 * 1024


class XMLRefused(ValueError):
    """The XML file is malformed or declares a DTD or entities; the message names file and line."""


def _refuse(*_args) -> None:
    raise XMLRefused("declares a DTD or entities (refused: annotation XML needs neither)")


def parse_xml(path: str) -> ET.Element:
    """Parse ``path`` and return its root element.

    A first pass with expat refuses any ``<!DOCTYPE`` or ``<!ENTITY`` before a
    tree is built, so entity expansion (billion laughs, external entities)
    never happens.

    Raises:
        XMLRefused: Unreadable, too large, not well-formed, or with a DTD (names the file and line).
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_XML_BYTES + 1)
    except OSError as exc:
        raise XMLRefused(f"{path}: cannot read ({type(exc).__name__})") from None
    if len(data) > MAX_XML_BYTES:
        raise XMLRefused(f"{path}: larger than {MAX_XML_BYTES // 2**20} MiB")
    checker = xml.parsers.expat.ParserCreate()
    checker.StartDoctypeDeclHandler = _refuse
    checker.EntityDeclHandler = _refuse
    checker.UnparsedEntityDeclHandler = _refuse
    checker.ExternalEntityRefHandler = _refuse
    try:
        checker.Parse(data, True)
    except XMLRefused as exc:
        raise XMLRefused(f"{path} line {checker.CurrentLineNumber}: {exc}") from None
    except xml.parsers.expat.ExpatError as exc:
        message = xml.parsers.expat.ErrorString(exc.code)
        raise XMLRefused(f"{path} line {exc.lineno}: not well-formed XML ({message})") from None
    try:
        return ET.fromstring(data)
    except ET.ParseError as exc:
        raise XMLRefused(f"{path} line {exc.position[0]}: not well-formed XML") from None
