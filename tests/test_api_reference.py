"""docs/api.md is what scripts/api_reference.py writes from the docstrings, and every public function, method and
property has a docstring to write."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import vkbackend

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("api_reference", ROOT / "scripts" / "api_reference.py")
assert spec is not None and spec.loader is not None
api_reference = importlib.util.module_from_spec(spec)
spec.loader.exec_module(api_reference)


def test_the_committed_page_is_current():
    page = api_reference.render()
    assert page == api_reference.PAGE.read_text(), (
        "docs/api.md is stale: a docstring or signature changed; run python3 scripts/api_reference.py and commit it"
    )


def test_every_public_function_method_and_property_has_a_docstring():
    assert api_reference.undocumented() == []


def test_the_page_covers_every_public_name_and_depends_only_on_the_source():
    page = api_reference.render()
    headings = {line[4:] for line in page.splitlines() if line.startswith("### ")}
    assert headings == set(vkbackend.__all__)
    assert "#### Buffer.to_numpy" in page and "#### Buffer.__dlpack__" in page and "#### Device.launch" in page
    assert " at 0x" not in page and "<class " not in page and "<function " not in page  # no object addresses
    assert api_reference.render() == page
