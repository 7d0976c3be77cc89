"""The engine's quantized ops (issue #17) natively: QLinearConv / ConvInteger, QLinearMatMul /
MatMulInteger / com.microsoft QGemm, QuantizeLinear / DequantizeLinear (per tensor),
DynamicQuantizeLinear, com.microsoft QLinearGlobalAveragePool and Cast of integers to float32, on
quantization.c through ctypes.

The support checks, the operands' analysis and plans, and the program emitters are the shared
half (onnxedge.oxk_quant, which the page's engine uses too); here are the node-by-node runs. Both
paths call the same C kernels with the same plans, so a group's first run gives the bits its
program gives (integer sums are exact; requantization is onnxruntime's: float32 multiplier,
clamp, round half to even, zero point). What the kernels cannot take at run time (a
non-constant scale or weight, a dtype, a rank) returns None and the CPU kernel runs the node; the
program refuses that signature.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from onnxedge import ir, oxk_quant
from onnxedge.oxk_quant import (EMIT, I8, I32, MS, Q8, U8, check_cast, check_dql, check_qconv,  # noqa: F401
                                check_qdq, check_qgemm, check_qpool)

from .library import KernelLibrary, Plan, data_address

Run = Callable[[Dict[str, Any]], Optional[List[np.ndarray]]]
F32 = np.dtype(np.float32)


def _cpu(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
    """The run of a node whose constant operands the kernels cannot take: the CPU kernel runs it."""
    return None


def _runtime_zero(env: Dict[str, Any], name: str, dtype: np.dtype) -> Tuple[Optional[np.ndarray], int, bool]:
    """(array, address, ok) of a computed zero point of `dtype` (address 0: none)."""
    if not name:
        return None, 0, True
    z = env.get(name)
    if type(z) is not np.ndarray or z.dtype != dtype or z.size != 1:
        return None, 0, False
    z = np.ascontiguousarray(z)
    return z, z.__array_interface__["data"][0], True


def _call(lib: KernelLibrary, plan: Plan, what: str, n: int, x: np.ndarray, zaddr: int, y: np.ndarray) -> None:
    x, xa = data_address(x)
    rc = plan.fn(plan.addr, n, xa, zaddr or None, data_address(y)[1] if y.size else None)
    if rc:
        lib.check(rc, what)


# ---------------------------------------------------------------------------- convolution

def build_qconv(node: ir.Node, lib: KernelLibrary, consts: Dict[str, np.ndarray]) -> Run:
    """QLinearConv / ConvInteger on oxk_qconv_run (plans: onnxedge.oxk_quant.conv_plans)."""
    q = oxk_quant.conv_plans(node, lib, consts)
    if q is None:
        return _cpu
    plan_for, xn, xzn, y_dt = q
    x_zero_const = not xzn
    what = node.describe()

    def run(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        x = env[xn]
        if type(x) is not np.ndarray or x.dtype not in Q8:
            return None
        ent = plan_for(x.shape, x.dtype)
        z, zaddr, ok = (None, 0, True) if x_zero_const else _runtime_zero(env, xzn, x.dtype)
        if ent is None or not ok:
            return None
        plan, oshape = ent
        y = np.empty(oshape, y_dt)
        _call(lib, plan, what, x.shape[0], x, zaddr, y)
        return [y]

    run.qplan = q  # type: ignore[attr-defined]
    return run


# ---------------------------------------------------------------------------- GEMM

def build_qgemm(node: ir.Node, lib: KernelLibrary, consts: Dict[str, np.ndarray]) -> Run:
    """QLinearMatMul / MatMulInteger / QGemm on oxk_qgemm_run (plans: onnxedge.oxk_quant.gemm_plans)."""
    q = oxk_quant.gemm_plans(node, lib, consts)
    if q is None:
        return _cpu
    plan_for, an, azn, y_dt, K, N = q
    a_zero_const = not azn
    what = node.describe()
    two_d = node.op_type == "QGemm"

    def run(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        x = env[an]
        if type(x) is not np.ndarray or x.dtype not in Q8 or x.ndim < 1 or x.shape[-1] != K \
                or (two_d and x.ndim != 2):
            return None
        plan = plan_for(x.dtype)
        z, zaddr, ok = (None, 0, True) if a_zero_const else _runtime_zero(env, azn, x.dtype)
        if plan is None or not ok:
            return None
        y = np.empty(x.shape[:-1] + (N,), y_dt)
        _call(lib, plan, what, x.size // K if K else 0, x, zaddr, y)
        return [y]

    run.qplan = q  # type: ignore[attr-defined]
    return run


# ---------------------------------------------------------------------------- elementwise

def build_qdq(node: ir.Node, lib: KernelLibrary, consts: Dict[str, np.ndarray]) -> Run:
    """Per-tensor QuantizeLinear / DequantizeLinear with constant scale and zero point."""
    p = oxk_quant.qdq_params(node, consts)
    if p is None:
        return _cpu
    scale, zero, dt = p
    xn = node.inputs[0]
    if node.op_type == "QuantizeLinear":
        def run(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
            x = env[xn]
            if type(x) is not np.ndarray or x.dtype != F32:
                return None
            return [lib.quantize(x, scale, zero, dt)]
    else:
        def run(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
            x = env[xn]
            if type(x) is not np.ndarray or x.dtype != dt:
                return None
            return [lib.dequantize(x, scale, zero)]
    run.qargs = (dt, scale, zero)  # type: ignore[attr-defined]
    return run


def build_cast(node: ir.Node, lib: KernelLibrary, consts: Dict[str, np.ndarray]) -> Run:
    """Cast to float32 as oxk_dequantize with scale 1 and zero 0 (C's rounding of int32 and int64
    to float32 is numpy's: to nearest, ties to even)."""
    xn = node.inputs[0]
    if int(node.attributes.get("to", 0)) != 1:
        return _cpu

    def run(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        x = env[xn]
        if type(x) is not np.ndarray or x.dtype not in oxk_quant.CAST_FROM:
            return None
        return [lib.dequantize(x)]
    return run


def build_dql(node: ir.Node, lib: KernelLibrary, consts: Dict[str, np.ndarray]) -> Run:
    """DynamicQuantizeLinear as onnxruntime computes it (scale 1 for an all-zero input)."""
    xn = node.inputs[0]

    def run(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        x = env[xn]
        if type(x) is not np.ndarray or x.dtype != F32:
            return None
        return lib.dynamic_quantize(x)
    return run


def build_qpool(node: ir.Node, lib: KernelLibrary, consts: Dict[str, np.ndarray]) -> Run:
    """QLinearGlobalAveragePool as MLAS computes it (onnxedge.oxk_quant.qpool_params)."""
    params = oxk_quant.qpool_params(node, consts)
    if params is None:
        return _cpu
    xn = node.inputs[0]

    def run(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        x = env[xn]
        if type(x) is not np.ndarray or x.dtype not in Q8:
            return None
        p = params(x.dtype, x.shape)
        return None if p is None else [lib.qglobal_pool(x, *p)]

    run.qpool = params  # type: ignore[attr-defined]
    return run


BUILDS = {"QLinearConv": build_qconv, "ConvInteger": build_qconv, "QLinearMatMul": build_qgemm,
          "MatMulInteger": build_qgemm, "QGemm": build_qgemm, "QuantizeLinear": build_qdq,
          "DequantizeLinear": build_qdq, "Cast": build_cast, "DynamicQuantizeLinear": build_dql,
          "QLinearGlobalAveragePool": build_qpool}
# (domain, op, check, build) of the table (edge/neon/ops.py TABLE); EMIT: onnxedge.oxk_quant's
RECORDS = [(domain, op, check, BUILDS[op]) for domain, op, check in oxk_quant.CHECKS]

__all__ = ["EMIT", "RECORDS", "build_qconv", "build_qgemm", "build_qdq", "build_cast", "build_dql",
           "build_qpool", "check_qconv", "check_qgemm", "check_qdq", "check_cast", "check_dql", "check_qpool"]
