"""The intermediate representation every loader produces and every provider reads.

Plain Python objects; initializers are numpy arrays.

Attributes are typed once, here, and every reader can rely on it (no defensive decoding):

    FLOAT -> float          FLOATS -> list of float       TENSOR  -> numpy array
    INT   -> int            INTS   -> list of int         TENSORS -> list of numpy arrays
    STRING -> str           STRINGS -> list of str        GRAPH(S) -> `Graph` (list of them)
    SPARSE_TENSOR(S) -> `SparseTensor` (list)   TYPE_PROTO(S) -> `TypeInfo` (list)
    a reference to a caller's attribute (function bodies) -> `AttrRef`

STRING bytes are decoded as UTF-8 with `surrogateescape` (so any byte string round-trips through
the writers). `Node` and `Function` enforce the rule when they are built (`attribute_value`):
bytes become str, numpy scalars become int/float, tuples become lists, whoever builds the node
(a loader, an optimizer pass, a test).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Set, Tuple, Union

import numpy as np

from . import dtypes

Dim = Union[int, str, None]   # a fixed size, a symbolic name, or unknown


class TypeInfo:
    """The type of a value: a tensor, a sequence, an optional or a map."""

    __slots__ = ("kind", "elem_type", "shape", "elem")

    def __init__(self, kind: str, elem_type: int = 0, shape: Optional[List[Dim]] = None,
                 elem: Optional["TypeInfo"] = None):
        self.kind = kind            # "tensor" | "sparse_tensor" | "sequence" | "optional" | "map"
        self.elem_type = elem_type  # tensor element type (map: key type)
        self.shape = shape          # list of dims, or None when the rank is unknown
        self.elem = elem            # element type of a sequence/optional, value type of a map

    @classmethod
    def tensor(cls, elem_type: int, shape: Optional[Sequence[Dim]] = None) -> "TypeInfo":
        """A tensor type."""
        return cls("tensor", elem_type, None if shape is None else list(shape))

    def ort_string(self) -> str:
        """onnxruntime's type string, e.g. 'tensor(float)' or 'seq(tensor(int64))'."""
        if self.kind in ("tensor", "sparse_tensor"):
            return dtypes.ort_type_string(self.elem_type) if self.elem_type else "tensor(undefined)"
        if self.kind == "sequence":
            return "seq(%s)" % (self.elem.ort_string() if self.elem else "undefined")
        if self.kind == "optional":
            return "optional(%s)" % (self.elem.ort_string() if self.elem else "undefined")
        if self.kind == "map":
            key = dtypes.lookup(self.elem_type).ort_name
            return "map(%s,%s)" % (key, self.elem.ort_string() if self.elem else "undefined")
        return self.kind

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, TypeInfo) and self.kind == other.kind
                and self.elem_type == other.elem_type and self.shape == other.shape
                and self.elem == other.elem)

    def __repr__(self) -> str:
        if self.kind == "tensor":
            return "TypeInfo(%s, %s)" % (self.ort_string(), self.shape)
        return "TypeInfo(%s)" % self.ort_string()


class ValueInfo:
    """A named, typed value of a graph (input, output or intermediate)."""

    __slots__ = ("name", "type", "doc_string")

    def __init__(self, name: str, type: Optional[TypeInfo] = None, doc_string: str = ""):
        self.name = name
        self.type = type
        self.doc_string = doc_string

    def __repr__(self) -> str:
        return "ValueInfo(%r, %r)" % (self.name, self.type)


class SparseTensor:
    """A COO sparse tensor attribute or initializer (values, indices, dense shape)."""

    __slots__ = ("values", "indices", "dims")

    def __init__(self, values: np.ndarray, indices: np.ndarray, dims: Sequence[int]):
        self.values, self.indices, self.dims = values, indices, list(dims)

    def to_dense(self) -> np.ndarray:
        """The dense numpy array this sparse tensor stands for."""
        out = np.zeros(self.dims, dtype=self.values.dtype)
        idx = np.asarray(self.indices, dtype=np.int64)
        if idx.ndim == 1:
            out.reshape(-1)[idx] = self.values
        elif idx.size:
            out[tuple(idx.T)] = self.values
        return out


class AttrRef:
    """An attribute of a function-body node that refers to the caller's attribute."""

    __slots__ = ("ref_attr_name",)

    def __init__(self, ref_attr_name: str):
        self.ref_attr_name = ref_attr_name

    def __repr__(self) -> str:
        return "AttrRef(%r)" % self.ref_attr_name


_NOT_PLAIN = (bytes, bytearray, np.generic)


def _plain(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="surrogateescape")
    if isinstance(value, np.generic) and not isinstance(value, (np.str_, np.bytes_)):
        return value.item() if value.dtype.kind in "biuf" else value
    if isinstance(value, np.bytes_):
        return bytes(value).decode("utf-8", errors="surrogateescape")
    if isinstance(value, np.str_):
        return str(value)
    return value


def attribute_value(value: Any) -> Any:
    """An attribute value in the IR's typed form (see the module docstring): bytes -> str,
    numpy scalars -> int / float, tuples -> lists, element by element in lists."""
    if isinstance(value, tuple) or (isinstance(value, list) and value
                                    and isinstance(value[0], _NOT_PLAIN)):
        return [_plain(v) for v in value]   # lists are homogeneous: the first element tells
    return _plain(value)


def attribute_values(attributes: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """A new attribute dict with every value in the IR's typed form."""
    return {k: attribute_value(v) for k, v in (attributes or {}).items()}


class Node:
    """One operator application. Missing optional inputs/outputs are empty strings."""

    __slots__ = ("op_type", "domain", "inputs", "outputs", "attributes", "name", "doc_string")

    def __init__(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str],
                 attributes: Optional[Dict[str, Any]] = None, domain: str = "", name: str = "",
                 doc_string: str = ""):
        self.op_type = op_type
        self.domain = "" if domain == "ai.onnx" else domain
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.attributes = attribute_values(attributes)
        self.name = name
        self.doc_string = doc_string

    def subgraphs(self) -> List[Tuple[str, "Graph"]]:
        """(attribute name, graph) for every GRAPH / GRAPHS attribute."""
        out = []
        for key, val in self.attributes.items():
            if isinstance(val, Graph):
                out.append((key, val))
            elif isinstance(val, list) and val and isinstance(val[0], Graph):
                out.extend((key, g) for g in val)
        return out

    def reads(self, cache: Optional[Dict[int, List[str]]] = None) -> List[str]:
        """Every value the node reads: its non-empty inputs, then what its subgraphs take from
        outer scopes (`cache`: see Graph.outer_references)."""
        names = [n for n in self.inputs if n]
        for _, sub in self.subgraphs():
            names.extend(sub.outer_references(cache))
        return names

    def describe(self) -> str:
        """A short human label: op (domain) and the node's name."""
        dom = self.domain or "ai.onnx"
        return "%s node %r (domain %s)" % (self.op_type, self.name or self.outputs[:1], dom)

    def __repr__(self) -> str:
        return "Node(%s%s, %r -> %r)" % (self.domain + "." if self.domain else "", self.op_type,
                                         self.inputs, self.outputs)


class Graph:
    """Nodes in topological order, inputs, outputs, initializers and value infos."""

    def __init__(self, name: str = "", nodes: Optional[List[Node]] = None,
                 inputs: Optional[List[ValueInfo]] = None, outputs: Optional[List[ValueInfo]] = None,
                 initializers: Optional[Dict[str, Any]] = None,
                 value_info: Optional[Dict[str, ValueInfo]] = None, doc_string: str = ""):
        self.name = name
        self.nodes = list(nodes or [])
        self.inputs = list(inputs or [])
        self.outputs = list(outputs or [])
        self.initializers = dict(initializers or {})   # name -> np.ndarray (or SparseTensor)
        self.value_info = dict(value_info or {})       # name -> ValueInfo for intermediates
        self.doc_string = doc_string

    def input_names(self) -> List[str]:
        """Names of the graph inputs that are not initializers (what a caller feeds)."""
        return [v.name for v in self.inputs if v.name not in self.initializers]

    def type_of(self, name: str) -> Optional[TypeInfo]:
        """The declared type of a value, from inputs, outputs, value infos or initializers."""
        for vi in self.inputs:
            if vi.name == name:
                return vi.type
        for vi in self.outputs:
            if vi.name == name:
                return vi.type
        vi = self.value_info.get(name)
        if vi is not None:
            return vi.type
        init = self.initializers.get(name)
        if isinstance(init, np.ndarray):
            try:
                return TypeInfo.tensor(dtypes.from_numpy(init.dtype), list(init.shape))
            except KeyError:
                return None
        return None

    def outer_references(self, cache: Optional[Dict[int, List[str]]] = None) -> List[str]:
        """Names this graph (and its subgraphs) reads but does not define: outer-scope values.
        `cache` (keyed by id(graph)) lets a caller that asks at every nesting level pay for each
        subgraph once while the graphs do not change."""
        if cache is not None and id(self) in cache:
            return cache[id(self)]
        defined = set(self.initializers) | {v.name for v in self.inputs} | {""}
        needed: List[str] = []   # in order of first read (a set beside it keeps this linear)
        seen: Set[str] = set()
        for node in self.nodes:
            for name in node.reads(cache):
                if name not in defined and name not in seen:
                    seen.add(name)
                    needed.append(name)
            defined.update(node.outputs)
        if cache is not None:
            cache[id(self)] = needed
        return needed

    def __repr__(self) -> str:
        return "Graph(%r, %d nodes, %d inputs, %d outputs)" % (
            self.name, len(self.nodes), len(self.inputs), len(self.outputs))


class Function:
    """A model-local function (FunctionProto): a node template expanded at the call site."""

    def __init__(self, name: str, domain: str, inputs: List[str], outputs: List[str],
                 attributes: List[str], attribute_defaults: Dict[str, Any], nodes: List[Node],
                 opset_imports: Dict[str, int], overload: str = ""):
        self.name, self.domain, self.overload = name, domain, overload
        self.inputs, self.outputs = inputs, outputs
        self.attributes, self.attribute_defaults = attributes, attribute_values(attribute_defaults)
        self.nodes, self.opset_imports = nodes, opset_imports


class Model:
    """A whole model: the main graph, opset imports, functions and metadata."""

    def __init__(self, graph: Graph, opset_imports: Optional[Dict[str, int]] = None,
                 ir_version: int = 8, producer_name: str = "", producer_version: str = "",
                 domain: str = "", model_version: int = 0, doc_string: str = "",
                 metadata_props: Optional[Dict[str, str]] = None,
                 functions: Optional[List[Function]] = None):
        self.graph = graph
        self.opset_imports = {("" if k == "ai.onnx" else k): v
                              for k, v in (opset_imports or {"": 21}).items()}
        self.ir_version = ir_version
        self.producer_name = producer_name
        self.producer_version = producer_version
        self.domain = domain
        self.model_version = model_version
        self.doc_string = doc_string
        self.metadata_props = dict(metadata_props or {})
        self.functions = list(functions or [])

    def opset(self, domain: str = "") -> int:
        """The opset version the model imports for a domain ('' and 'ai.onnx' are the same)."""
        return self.opset_imports.get("" if domain == "ai.onnx" else domain, 0)
