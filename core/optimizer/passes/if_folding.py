"""If with a constant condition: the branch it takes replaces it, its nodes joining the graph.

A condition known at load (an initializer, or a value constant folding or shape folding made
constant for the shapes at hand) leaves one branch that can ever run; inlining it lets the
partitioner and the fusions see its nodes (so a C engine or GPU group need not stop at the If).
Branch-local values and initializers get fresh names; branch outputs that another branch node
makes take the If's output names; an output that is an outer value or a branch initializer goes
through an Identity. Branches holding subgraphs of their own are left alone (their outer
references would need renaming too).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Set

from ... import ir
from ..context import PassContext


def _taken_branch(ctx: PassContext, node: ir.Node) -> Optional[ir.Graph]:
    cond = ctx.const(node.inputs[0]) if node.inputs and node.inputs[0] else None
    if cond is None or cond.size != 1:
        return None
    branch = node.attributes.get("then_branch" if bool(cond.reshape(-1)[0]) else "else_branch")
    if not isinstance(branch, ir.Graph) or len(branch.outputs) != len(node.outputs):
        return None
    if branch.inputs or any(n.subgraphs() for n in branch.nodes):
        return None
    return branch


def _fresh(ctx: PassContext, base: str, chosen: Set[str]) -> str:
    name = ctx.fresh_name(base)
    k = 0
    while name in chosen:
        k += 1
        name = ctx.fresh_name("%s_%d" % (base, k))
    chosen.add(name)
    return name


def _inline(ctx: PassContext, node: ir.Node, branch: ir.Graph) -> List[ir.Node]:
    """The nodes that replace `node`: the branch's, renamed into this graph."""
    names: Dict[str, str] = {}
    chosen: Set[str] = set()
    made_by_node = {o for n in branch.nodes for o in n.outputs if o}
    claimed: Set[str] = set()
    for out, target in zip(branch.outputs, node.outputs):
        if out.name in made_by_node and out.name not in claimed and target:
            names[out.name] = target       # the producing node writes the If's output itself
            claimed.add(out.name)
    for local in sorted(made_by_node - claimed):
        names[local] = _fresh(ctx, "%s.%s" % (node.name or "if", local), chosen)
    for local, value in branch.initializers.items():
        if local not in names:
            names[local] = _fresh(ctx, "%s.%s" % (node.name or "if", local), chosen)
            ctx.graph.initializers[names[local]] = value
    new = []
    for n in branch.nodes:
        new.append(ir.Node(n.op_type, [names.get(i, i) if i else i for i in n.inputs],
                           [names.get(o, o) if o else o for o in n.outputs], n.attributes,
                           n.domain, n.name, n.doc_string))
    for out, target in zip(branch.outputs, node.outputs):
        if target and names.get(out.name) != target:
            new.append(ir.Node("Identity", [names.get(out.name, out.name)], [target], {}, "",
                               "%s.%s" % (node.name or "if", target)))
    return new


def run(ctx: PassContext) -> bool:
    """Replace every If whose condition is a constant by the branch it takes; True when one
    went."""
    changed = False
    for node in list(ctx.graph.nodes):
        if node.op_type != "If" or node.domain or id(node) in ctx.removed:
            continue
        branch = _taken_branch(ctx, node)
        if branch is None:
            continue
        ctx.replace([node], _inline(ctx, node, branch))
        changed = True
    return changed
