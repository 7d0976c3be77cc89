"""Custom operators as Python functions, the way onnxruntime-extensions' `@onnx_op` registers
them: the function becomes the kernel of (domain, op_type) on the CPU provider, which every other
provider falls back to.

    import numpy as np
    import onnxedge

    @onnxedge.custom_op("ReverseMatrix", domain="ai.onnx.contrib")
    def reverse_matrix(x):
        return np.flip(x, axis=0)

The function takes the node's inputs positionally (None for an absent optional input) and its
attributes as keyword arguments (declare them with defaults, or take **attrs); it returns one
numpy array, or a tuple for several outputs. Registration is process-wide and also serves
reduced builds (whose kernel index would otherwise refuse an op it does not list).
"""
from __future__ import annotations

from typing import Any, Callable

from .checker import is_domain, is_op_type
from .errors import InvalidArgument
from .kernels import registry

DEFAULT_DOMAIN = "ai.onnx.contrib"   # onnxruntime-extensions' domain


def register_custom_op(op_type: str, fn: Callable[..., Any], domain: str = DEFAULT_DOMAIN,
                       since: int = 1, until: int = registry.MAX_OPSET) -> None:
    """Register `fn` as the kernel of `domain`.`op_type` for opsets since..until."""
    if not is_op_type(op_type):
        raise InvalidArgument("custom op type %r: expected an identifier ([A-Za-z_][A-Za-z0-9_]*)"
                              % (op_type,))
    if not is_domain(domain):
        raise InvalidArgument("custom op domain %r: expected dotted identifiers, e.g. %r"
                              % (domain, DEFAULT_DOMAIN))
    if domain in ("", "ai.onnx", "ai.onnx.ml"):
        raise InvalidArgument("custom op %s: domain %r is ONNX's own; use your own domain (e.g. %r)"
                              % (op_type, domain or "ai.onnx", DEFAULT_DOMAIN))
    if not callable(fn):
        raise InvalidArgument("custom op %s: %r is not callable" % (op_type, fn))
    if int(since) < 1 or int(until) < int(since):
        raise InvalidArgument("custom op %s: opset range %s..%s is empty" % (op_type, since, until))
    registry.add(op_type, fn, domain=domain, since=int(since), until=int(until), custom=True)


def custom_op(op_type: str, domain: str = DEFAULT_DOMAIN, since: int = 1,
              until: int = registry.MAX_OPSET) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator form of `register_custom_op`."""
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        register_custom_op(op_type, fn, domain=domain, since=since, until=until)
        return fn
    return wrap


__all__ = ["custom_op", "register_custom_op", "DEFAULT_DOMAIN"]
