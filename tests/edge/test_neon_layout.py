"""The kernel library states its struct layouts once (oxk.h, exported by layout.c's oxk_layout):
the ctypes binding builds its Structures from that table and refuses one that disagrees."""
from __future__ import annotations

import ctypes

import pytest

from neon_helpers import ensure_built

ensure_built()

from onnxedge.edge.neon import library  # noqa: E402
from onnxedge.errors import Fail  # noqa: E402

PLANS = ("oxk_sgemm_plan", "oxk_conv_plan", "oxk_pool_plan")


@pytest.fixture(scope="module", params=["", "generic"])
def lib(request):
    return library.load(request.param)


def test_table_names_every_plan_and_program_struct(lib):
    for name in PLANS + ("oxk_program", "oxk_instr", "oxk_slot", "oxk_binary_args", "oxk_gemm_args",
                         "oxk_field", "oxk_epilogue"):
        assert name in lib.layout and lib.layout[name][1], name


def test_sgemm_plan_layout_is_the_c_one(lib):
    # independent of the table: the C declaration's natural layout on this ABI
    size, fields = lib.layout["oxk_sgemm_plan"]
    names = [f[0] for f in fields]
    assert names == ["transA", "transB", "N", "K", "alpha", "beta", "packA", "packB", "bias",
                     "bias_kind", "act", "p0", "p1"]
    ptr = ctypes.sizeof(ctypes.c_void_p)
    offsets = dict((f[0], f[1]) for f in fields)
    assert offsets["packA"] == 24 and offsets["packB"] == 24 + ptr and offsets["bias_kind"] == 24 + 3 * ptr
    assert size == 24 + 3 * ptr + 16
    assert lib.layout["oxk_instr"][1][-1][2] == 8 * 4   # int slot[OXK_INSTR_SLOTS]


def test_built_structures_match(lib):
    for name in PLANS:
        cls = lib.structs[name]
        library.check_structure(cls, name, lib.layout)
        assert ctypes.sizeof(cls) == lib.layout[name][0]


class _Swapped(ctypes.Structure):   # transA and transB in the wrong order
    _fields_ = [("transB", ctypes.c_int), ("transA", ctypes.c_int)] + \
        list(library.load().structs["oxk_sgemm_plan"]._fields_[2:])


class _ShortPool(ctypes.Structure):   # OW missing
    _fields_ = list(library.load().structs["oxk_pool_plan"]._fields_[:-1])


class _WideConv(ctypes.Structure):   # a double where the library has a float
    _fields_ = [(n, ctypes.c_double if n == "p0" else t)
                for n, t in library.load().structs["oxk_conv_plan"]._fields_]


@pytest.mark.parametrize("cls,name,words", [
    (_Swapped, "oxk_sgemm_plan", ["oxk_sgemm_plan", "transA", "transB"]),
    (_ShortPool, "oxk_pool_plan", ["oxk_pool_plan", "OW"]),
    (_WideConv, "oxk_conv_plan", ["oxk_conv_plan.p0"]),
])
def test_wrong_layout_is_refused(cls, name, words):
    with pytest.raises(Fail) as e:
        library.check_structure(cls, name, library.load().layout)
    for w in words:
        assert w in str(e.value)


def test_table_disagreeing_with_the_binding_is_refused_at_build():
    table = {k: (v[0], list(v[1])) for k, v in library.load().layout.items()}
    size, fields = table["oxk_field"]
    table["oxk_field"] = (size, [(f, off + (8 if f == "size" else 0), s, k) for f, off, s, k in fields])
    with pytest.raises(Fail, match=r"oxk_field\.size"):
        library.structures(table)
    table = {k: v for k, v in library.load().layout.items()}
    table["oxk_slot"] = (table["oxk_slot"][0], [("kind", 0, 3, "i")] + table["oxk_slot"][1][1:])
    with pytest.raises(Fail, match=r"oxk_slot\.kind"):
        library.structures(table)


def test_plans_built_from_the_table_still_run(lib):
    import numpy as np
    rng = np.random.default_rng(1)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    b = rng.standard_normal((7, 3)).astype(np.float32)
    plan = lib.sgemm_plan(3, 7, packed_b=lib.pack_b(b))
    y = np.empty((5, 3), np.float32)
    lib.check(plan.fn(plan.addr, 5, a.ctypes.data, None, y.ctypes.data), "sgemm_run")
    np.testing.assert_allclose(y, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
