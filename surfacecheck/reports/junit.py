"""JUnit XML writer (the common ``testsuites/testsuite/testcase`` dialect CI systems read).

Built with :mod:`xml.etree.ElementTree`, so text is escaped correctly. A test case has at most
one outcome element: ``<error>`` (the check crashed), ``<failure>`` (one or more violations,
joined into one element) or ``<skipped>`` (no verdict); none means it passed.
"""
from __future__ import annotations

import datetime as _dt
import os
import xml.etree.ElementTree as ET

from surfacecheck.core.cases import Outcome, TestCase


def _outcome(parent: ET.Element, tag: str, outcome: Outcome) -> None:
    element = ET.SubElement(parent, tag, {"message": outcome.message})
    if outcome.type:
        element.set("type", outcome.type)
    if outcome.text:
        element.text = outcome.text


def build(suite_name: str, cases: list[TestCase], timestamp: _dt.datetime | None = None) -> ET.Element:
    """The ``<testsuites>`` element holding one ``<testsuite>`` with ``cases``."""
    statuses = [case.status for case in cases]
    total_time = sum(case.time for case in cases)
    counts = {
        "tests": str(len(cases)),
        "failures": str(statuses.count("failure")),
        "errors": str(statuses.count("error")),
        "skipped": str(statuses.count("skipped")),
        "time": f"{total_time:.3f}",
    }
    root = ET.Element("testsuites", {"name": suite_name, **counts})
    stamp = (timestamp or _dt.datetime.now(_dt.timezone.utc)).isoformat(timespec="seconds")
    suite = ET.SubElement(root, "testsuite", {"name": suite_name, **counts, "timestamp": stamp})
    for case in cases:
        element = ET.SubElement(
            suite, "testcase", {"classname": case.classname, "name": case.name, "time": f"{case.time:.3f}"}
        )
        if case.properties:
            props = ET.SubElement(element, "properties")
            for key, value in case.properties.items():
                ET.SubElement(props, "property", {"name": key, "value": str(value)})
        if case.error is not None:
            _outcome(element, "error", case.error)
        elif case.failure is not None:
            _outcome(element, "failure", case.failure)
        elif case.skipped is not None:
            _outcome(element, "skipped", case.skipped)
        if case.system_out:
            ET.SubElement(element, "system-out").text = case.system_out
    return root


def write_junit(path: str | os.PathLike, suite_name: str, cases: list[TestCase]) -> None:
    """Write the JUnit XML document for ``cases`` to ``path`` (UTF-8, with XML declaration)."""
    tree = ET.ElementTree(build(suite_name, cases))
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)
