"""WGSL templates share snippets through `//#include "common/..."` lines (web/webgpu/template.py)."""
from __future__ import annotations

import os
import re

import pytest

from onnxedge.errors import InvalidArgument
from onnxedge.web.webgpu import template

SHADERS = os.path.join(os.path.dirname(os.path.abspath(template.__file__)), "shaders")


def test_include_is_replaced_by_the_snippet_once():
    text = template.source("elementwise_binary")
    with open(os.path.join(SHADERS, "common", "coords.wgsl")) as f:
        snippet = f.read()
    assert snippet.strip() in text and text.count("fn coords_of(") == 1
    assert not re.search(r"^//#include", text, re.M)
    twice = '//#include "common/coords.wgsl"\n' * 2
    assert template.expand_includes(twice, "t.wgsl", set()).count("fn coords_of(") == 1


@pytest.mark.parametrize("name", ["../template.py", "/etc/passwd", "common/../../x.wgsl",
                                  "common/missing.wgsl", "common/coords.py", "", "a b.wgsl"])
def test_a_bad_include_is_refused(name):
    with pytest.raises(InvalidArgument, match="is not a .wgsl file of the shaders folder"):
        template.expand_includes('//#include "%s"\n' % name, "bad.wgsl", set())


def test_no_two_shaders_repeat_the_index_to_coordinate_loop():
    """The peel `rem % d` then `rem = rem / d` lives in common/coords.wgsl, not pasted per shader."""
    peel = re.compile(r"(\w+) = \1 / ")
    found = []
    for name in sorted(os.listdir(SHADERS)):
        if name.endswith(".wgsl"):
            with open(os.path.join(SHADERS, name)) as f:
                if peel.search(f.read()):
                    found.append(name)
    assert len(found) <= 1, "shaders still peeling coordinates by hand: %s" % found
