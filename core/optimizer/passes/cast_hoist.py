"""Cast to float32 moves above the views and broadcasts of an integer tensor.

Exporters write attention masks as `Cast(Unsqueeze(mask_int64), to=float)` (HuggingFace's
`extended_attention_mask`, often through two Unsqueezes or an Expand). Cast is elementwise, so
`Cast(View(x)) == View(Cast(x))` for Reshape, Flatten, Squeeze, Unsqueeze, Identity and Expand.
Swapping them leaves one integer node, a Cast an engine reads straight from the input, and the
view on float32 values, which an engine program holds; the integer view would otherwise stay on
the CPU and split the program around it. The view's output must be read by the Cast alone.
"""
from __future__ import annotations

from typing import Optional

from ... import ir
from ..context import PassContext
from ._match import is_op

VIEWS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Expand")
FLOAT = 1   # ONNX TensorProto.FLOAT


def _integer(ctx: PassContext, name: str) -> bool:
    dt = ctx.dtype(name)
    return dt is not None and dt.kind in "iub"


def _view_below(ctx: PassContext, cast: ir.Node) -> Optional[ir.Node]:
    """The view producing the Cast's input, when the swap applies."""
    if not cast.inputs or int(cast.attributes.get("to", 0)) != FLOAT:
        return None
    view = ctx.producer_of(cast.inputs[0])
    if view is None or view.domain or view.op_type not in VIEWS or not view.inputs:
        return None
    x = view.inputs[0]
    if ctx.only_user(view.outputs[0]) is not cast or ctx.const(x) is not None or not _integer(ctx, x):
        return None
    return view


def run(ctx: PassContext) -> bool:
    """Swap every Cast-to-float32 of an integer view for the view of a Cast (module docstring);
    True when one was."""
    changed = False
    for cast in list(ctx.graph.nodes):
        if id(cast) in ctx.removed or not is_op(cast, "Cast"):
            continue
        view = _view_below(ctx, cast)
        if view is None:
            continue
        x = view.inputs[0]
        as_float = ctx.fresh_name(x + "_float")
        ctx.replace([view, cast], [
            ctx.make_node("Cast", [x], [as_float], dict(cast.attributes), name=cast.name),
            ctx.make_node(view.op_type, [as_float] + list(view.inputs[1:]), list(cast.outputs),
                          dict(view.attributes), name=view.name)])
        changed = True
    return changed
