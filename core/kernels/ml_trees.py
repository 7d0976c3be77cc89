"""ai.onnx.ml TreeEnsembleClassifier and TreeEnsembleRegressor (opsets 1 and 3, including v3's
`*_as_tensor` attributes), with onnxruntime's aggregation, base values, binary-class and
post-transform rules.

Trees are evaluated with numpy for all rows and all trees at once: one step per depth level,
each step moving every (row, tree) pair that is not at a leaf yet to its next node."""
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional

import numpy as np

from ..errors import InvalidArgument, NotImplemented
from .ml import ML, apply_transform, class_labels, expand_binary, ort_probit, text_of, transform_code
from .registry import register

_MODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4,
          "BRANCH_NEQ": 5, "LEAF": 6}
_LEAF = 6
_AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")
_CHUNK = 1 << 20          # (row, tree) pairs walked at once


class Forest(NamedTuple):
    """Flattened trees: per node its feature, threshold, mode code, children (node positions),
    missing-value direction; the roots; dense leaf outputs."""

    feature: np.ndarray
    threshold: np.ndarray
    mode: np.ndarray
    true_child: np.ndarray
    false_child: np.ndarray
    tracks_missing: np.ndarray
    roots: np.ndarray
    weights: np.ndarray          # (nodes, targets): summed leaf weights
    has_weight: np.ndarray       # (nodes, targets): the leaf names that target
    first_weight: np.ndarray     # (nodes,): the leaf's first weight (one-target path)
    same_mode: int               # the mode every branch shares, or -1


def _pick(op: str, name: str, plain: Optional[List[Any]], tensor: Optional[np.ndarray],
          required: bool = True) -> Optional[np.ndarray]:
    """An attribute given as a float list or as its `_as_tensor` form (float64 kept)."""
    if plain is not None and len(plain) and tensor is not None:
        raise InvalidArgument("%s: give %s or %s_as_tensor, not both" % (op, name, name))
    if tensor is not None:
        arr = np.asarray(tensor).reshape(-1)
        return arr.astype(np.float64 if arr.dtype == np.float64 else np.float32)
    if plain is not None:
        return np.asarray(plain, dtype=np.float32).reshape(-1)
    if required:
        raise InvalidArgument("%s: the %s attribute is required" % (op, name))
    return None


def _positions(op: str, keys: np.ndarray, sorted_keys: np.ndarray, order: np.ndarray,
               what: str) -> np.ndarray:
    """Node positions of (tree, node) keys; InvalidArgument naming `what` for unknown ones."""
    at = np.searchsorted(sorted_keys, keys)
    at = np.minimum(at, len(sorted_keys) - 1)
    bad = sorted_keys[at] != keys
    if bad.any():
        raise InvalidArgument("%s: %s names node %d, which no tree has"
                              % (op, what, int(keys[np.flatnonzero(bad)[0]])))
    return order[at]


def build_forest(op: str, attrs: Dict[str, Any], n_targets: int, prefix: str) -> Forest:
    """Check the nodes_* and <prefix>_* attributes and flatten them into a Forest."""
    tree_ids = np.asarray(attrs["nodes_treeids"] or [], dtype=np.int64)
    n = tree_ids.size
    if n == 0:
        raise InvalidArgument("%s: the tree has no nodes (nodes_treeids is empty)" % op)
    node_ids = np.asarray(attrs["nodes_nodeids"] or [], dtype=np.int64)
    feature = np.asarray(attrs["nodes_featureids"] or [], dtype=np.int64)
    modes_text = [text_of(m) for m in (attrs["nodes_modes"] or [])]
    unknown = [m for m in modes_text if m not in _MODES]
    if unknown:
        raise InvalidArgument("%s: node mode %r is not one of %s"
                              % (op, unknown[0], sorted(_MODES)))
    mode = np.asarray([_MODES[m] for m in modes_text], dtype=np.int64)
    t_ids = np.asarray(attrs["nodes_truenodeids"] or [], dtype=np.int64)
    f_ids = np.asarray(attrs["nodes_falsenodeids"] or [], dtype=np.int64)
    values = _pick(op, "nodes_values", attrs["nodes_values"], attrs["nodes_values_as_tensor"])
    tracks = attrs["nodes_missing_value_tracks_true"]
    tracks = np.zeros(n, dtype=bool) if not tracks else np.asarray(tracks, dtype=np.int64) == 1
    for name, arr in (("nodes_nodeids", node_ids), ("nodes_featureids", feature),
                      ("nodes_modes", mode), ("nodes_truenodeids", t_ids),
                      ("nodes_falsenodeids", f_ids), ("nodes_values", values)):
        if arr.size != n:
            raise InvalidArgument("%s: %s has %d entries, nodes_treeids %d"
                                  % (op, name, arr.size, n))
    if tracks.size < n:
        tracks = np.concatenate([tracks, np.zeros(n - tracks.size, dtype=bool)])
    span = int(max(node_ids.max(), t_ids.max(), f_ids.max(), 0)) + 1
    keys = tree_ids * span + node_ids
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    if (np.diff(sorted_keys) == 0).any():
        raise InvalidArgument("%s: a (tree, node) id pair appears twice" % op)
    branch = mode != _LEAF
    true_child = np.zeros(n, dtype=np.int64)
    false_child = np.zeros(n, dtype=np.int64)
    true_child[branch] = _positions(op, tree_ids[branch] * span + t_ids[branch], sorted_keys, order,
                                    "nodes_truenodeids")
    false_child[branch] = _positions(op, tree_ids[branch] * span + f_ids[branch], sorted_keys,
                                     order, "nodes_falsenodeids")
    roots = np.flatnonzero(np.concatenate([[True], tree_ids[1:] != tree_ids[:-1]]))
    weights, has_weight, first = _leaf_outputs(op, attrs, prefix, n_targets, tree_ids, span,
                                               sorted_keys, order, branch, values)
    used = np.unique(mode[branch])
    same = int(used[0]) if used.size == 1 else -1
    return Forest(feature, values, mode, true_child, false_child, tracks, roots, weights,
                  has_weight, first, same)


def _leaf_outputs(op: str, attrs: Dict[str, Any], prefix: str, n_targets: int,
                  tree_ids: np.ndarray, span: int, sorted_keys: np.ndarray, order: np.ndarray,
                  branch: np.ndarray, values: np.ndarray):
    """Dense (nodes, targets) leaf weights and flags, and each leaf's first weight."""
    ids = np.asarray(attrs[prefix + "_ids"] or [], dtype=np.int64)
    w_tree = np.asarray(attrs[prefix + "_treeids"] or [], dtype=np.int64)
    w_node = np.asarray(attrs[prefix + "_nodeids"] or [], dtype=np.int64)
    w = _pick(op, prefix + "_weights", attrs[prefix + "_weights"],
              attrs[prefix + "_weights_as_tensor"], required=False)
    w = np.zeros(0, dtype=np.float32) if w is None else w
    m = ids.size
    if not (w_tree.size == w_node.size == w.size == m):
        raise InvalidArgument("%s: %s_ids, _treeids, _nodeids and _weights must have the same "
                              "length (%d, %d, %d, %d)"
                              % (op, prefix, m, w_tree.size, w_node.size, w.size))
    if m and ((ids < 0).any() or (ids >= n_targets).any()):
        raise InvalidArgument("%s: %s_ids must lie in [0, %d)" % (op, prefix, n_targets))
    dtype = np.float64 if w.dtype == np.float64 else np.float32
    n = branch.size
    weights = np.zeros((n, n_targets), dtype=dtype)
    has = np.zeros((n, n_targets), dtype=bool)
    first = values.astype(dtype)
    if m:
        if (w_node >= span).any() or (w_node < 0).any():
            raise InvalidArgument("%s: %s_nodeids names a node no tree has" % (op, prefix))
        pos = _positions(op, w_tree * span + w_node, sorted_keys, order, prefix + "_nodeids")
        keep = ~branch[pos]          # weights on branch nodes are ignored, as onnxruntime does
        pos, ids, w = pos[keep], ids[keep], w[keep]
        np.add.at(weights, (pos, ids), w.astype(dtype))
        has[pos, ids] = True
        srt = np.lexsort((np.arange(pos.size), pos))
        lead = np.concatenate([[True], pos[srt][1:] != pos[srt][:-1]]) if pos.size else pos
        first[pos[srt][lead]] = w[srt][lead]
    return weights, has, first


def _compare(mode: np.ndarray, v: np.ndarray, s: np.ndarray, same: int) -> np.ndarray:
    """v (mode) s for each branch code; `same` >= 0 when all branches share one mode."""
    if same == 0:
        return v <= s
    if same == 1:
        return v < s
    if same == 2:
        return v >= s
    if same == 3:
        return v > s
    if same == 4:
        return v == s
    if same == 5:
        return v != s
    return np.select([mode == 0, mode == 1, mode == 2, mode == 3, mode == 4],
                     [v <= s, v < s, v >= s, v > s, v == s], v != s)


def leaves(forest: Forest, x: np.ndarray) -> np.ndarray:
    """The leaf each (row, tree) pair ends in, (N, trees) node positions."""
    n_rows, n_trees = x.shape[0], forest.roots.size
    cur = np.tile(forest.roots, (n_rows, 1))
    is_branch = forest.mode != _LEAF
    limit = forest.mode.size + 1
    rows = np.repeat(np.arange(n_rows), n_trees)
    flat = cur.reshape(-1)
    active = np.flatnonzero(is_branch[flat])
    for _ in range(limit):
        if active.size == 0:
            return flat.reshape(n_rows, n_trees)
        nd = flat[active]
        v = x[rows[active], forest.feature[nd]]
        with np.errstate(invalid="ignore"):          # NaN compares false (numpy 1.17 warns)
            go = _compare(forest.mode[nd], v, forest.threshold[nd], forest.same_mode)
        miss = forest.tracks_missing[nd]
        if miss.any():
            go = go | (miss & np.isnan(v))
        nxt = np.where(go, forest.true_child[nd], forest.false_child[nd])
        flat[active] = nxt
        active = active[is_branch[nxt]]
    raise InvalidArgument("tree ensemble: a tree has a cycle (no leaf after %d steps)" % limit)


def _accumulate(forest: Forest, leaf: np.ndarray, agg: str, dtype: Any):
    """Per row and target: the aggregated leaf weights and whether any leaf named the target."""
    n_rows = leaf.shape[0]
    n_t = forest.weights.shape[1]
    acc = np.zeros((n_rows, n_t), dtype=dtype)
    has = np.zeros((n_rows, n_t), dtype=bool)
    w_all = forest.weights.astype(dtype)
    for t in range(leaf.shape[1]):
        w = w_all[leaf[:, t]]
        h = forest.has_weight[leaf[:, t]]
        if agg in ("SUM", "AVERAGE"):
            acc += w
        else:
            better = np.minimum(acc, w) if agg == "MIN" else np.maximum(acc, w)
            acc = np.where(h, np.where(has, better, w), acc)
        has |= h
    return acc, has


def _one_target(forest: Forest, leaf: np.ndarray, agg: str, dtype: Any) -> np.ndarray:
    """onnxruntime's one-output path: each tree's leaf contributes its first weight."""
    w = forest.first_weight.astype(dtype)[leaf]
    if agg in ("SUM", "AVERAGE"):
        total = np.zeros(leaf.shape[0], dtype=dtype)
        for t in range(leaf.shape[1]):
            total += w[:, t]
        return total
    return w.min(axis=1) if agg == "MIN" else w.max(axis=1)


def _evaluate(op: str, X: np.ndarray, forest: Forest, agg: str, n_features_needed: int):
    x = np.asarray(X)
    if x.ndim == 1:
        x = x.reshape(1, -1)
    if x.ndim != 2 or x.dtype == object or x.dtype.kind not in "fiub":
        raise InvalidArgument("%s: X must be a numeric tensor of rank 1 or 2, got %s %s"
                              % (op, x.dtype, x.shape))
    if n_features_needed >= x.shape[1]:
        raise InvalidArgument("%s: a node reads feature %d but X has %d features"
                              % (op, n_features_needed, x.shape[1]))
    wide = x.dtype == np.float64 or forest.weights.dtype == np.float64
    dtype = np.float64 if wide else np.float32
    xv = x.astype(np.float64)
    step = max(1, _CHUNK // max(1, forest.roots.size))
    parts = [leaves(forest, xv[i:i + step]) for i in range(0, x.shape[0], step)]
    leaf = np.concatenate(parts, axis=0) if parts else np.zeros((0, forest.roots.size), np.int64)
    return leaf, dtype


def _aggregate_name(op: str, value: Any) -> str:
    name = text_of(value) if value is not None else "SUM"
    if name not in _AGGREGATES:
        raise InvalidArgument("%s: aggregate_function %r is not one of %s"
                              % (op, name, _AGGREGATES))
    return name


def _attrs(**kw: Any) -> Dict[str, Any]:
    return kw


@register("TreeEnsembleRegressor", domain=ML, since=1, until=4)
def tree_ensemble_regressor(X: np.ndarray, aggregate_function: Any = "SUM",
                            base_values: Optional[List[float]] = None,
                            base_values_as_tensor: Optional[np.ndarray] = None,
                            n_targets: Optional[int] = None,
                            nodes_falsenodeids: Optional[List[int]] = None,
                            nodes_featureids: Optional[List[int]] = None,
                            nodes_hitrates: Optional[List[float]] = None,
                            nodes_hitrates_as_tensor: Optional[np.ndarray] = None,
                            nodes_missing_value_tracks_true: Optional[List[int]] = None,
                            nodes_modes: Optional[List[str]] = None,
                            nodes_nodeids: Optional[List[int]] = None,
                            nodes_treeids: Optional[List[int]] = None,
                            nodes_truenodeids: Optional[List[int]] = None,
                            nodes_values: Optional[List[float]] = None,
                            nodes_values_as_tensor: Optional[np.ndarray] = None,
                            post_transform: Any = "NONE", target_ids: Optional[List[int]] = None,
                            target_nodeids: Optional[List[int]] = None,
                            target_treeids: Optional[List[int]] = None,
                            target_weights: Optional[List[float]] = None,
                            target_weights_as_tensor: Optional[np.ndarray] = None) -> np.ndarray:
    """TreeEnsembleRegressor-1/3: leaf weights of every tree aggregated per target (SUM,
    AVERAGE, MIN, MAX), plus base_values, post-transformed; (N, n_targets) float32."""
    op = "TreeEnsembleRegressor"
    post = transform_code(op, post_transform)
    agg = _aggregate_name(op, aggregate_function)
    nt = int(n_targets or 0)
    if nt <= 0:
        raise InvalidArgument("%s: n_targets must be > 0, got %r" % (op, n_targets))
    attrs = _attrs(nodes_treeids=nodes_treeids, nodes_nodeids=nodes_nodeids,
                   nodes_featureids=nodes_featureids, nodes_modes=nodes_modes,
                   nodes_truenodeids=nodes_truenodeids, nodes_falsenodeids=nodes_falsenodeids,
                   nodes_values=nodes_values, nodes_values_as_tensor=nodes_values_as_tensor,
                   nodes_missing_value_tracks_true=nodes_missing_value_tracks_true,
                   target_ids=target_ids, target_treeids=target_treeids,
                   target_nodeids=target_nodeids, target_weights=target_weights,
                   target_weights_as_tensor=target_weights_as_tensor)
    forest = build_forest(op, attrs, nt, "target")
    base = _pick(op, "base_values", base_values, base_values_as_tensor, required=False)
    base = [] if base is None else base.tolist()
    leaf, dtype = _evaluate(op, X, forest, agg, int(forest.feature.max(initial=0)))
    n_trees = forest.roots.size
    if nt == 1:
        score = _one_target(forest, leaf, agg, dtype)
        if agg == "AVERAGE":
            score = score / dtype(n_trees)
        origin = dtype(base[0]) if len(base) == 1 else dtype(0)
        score = (score + origin).astype(np.float32).reshape(-1, 1)
        return ort_probit(score) if post == "PROBIT" else score
    acc, has = _accumulate(forest, leaf, agg, dtype)
    if agg == "AVERAGE":
        acc = acc / dtype(n_trees)
    if len(base) == nt:
        acc = acc + np.asarray(base, dtype=dtype)
    scores = np.where(has, acc, 0).astype(np.float32)
    return apply_transform(scores, post)


def _binary_scores(acc: np.ndarray, has: np.ndarray, base: List[float], post: str,
                   binary_case: bool, all_positive: bool):
    """onnxruntime's two-class finish: (label index 0/1, (N, 2) scores)."""
    s0, s1 = acc[:, 0].copy(), acc[:, 1].copy()
    h0, h1 = has[:, 0].copy(), has[:, 1].copy()
    wri = np.full(acc.shape[0], -1, dtype=np.int64)
    if len(base) == 2:
        b0, b1 = acc.dtype.type(base[0]), acc.dtype.type(base[1])
        joined = s0 + b1
        s0, s1 = np.where(h1, -joined, s0 + b0), np.where(h1, joined, s1 + b1)
    elif len(base) == 1:
        s0 = s0 + acc.dtype.type(base[0])
    elif not base:
        wri[:] = 3
    two = h1 if len(base) in (0, 1) else np.ones_like(h1)   # else the second score is dropped
    pos = np.where(two & h1, s1, np.where(h0, s0, 0))
    if binary_case:
        win = pos > 0.5 if all_positive else pos > 0
        wri = np.where(win, 0 if all_positive else 2, 1 if all_positive else 3)
    else:
        win = pos > 0
    e0 = np.where(h0, s0, 0).astype(np.float32)     # a score nothing set reads as 0
    e1 = np.where(h1, s1, 0).astype(np.float32)
    out = apply_transform(np.stack([e0, e1], axis=1), post)
    single = ~two
    if single.any():
        out[single] = _single_scores(e0[single], post, wri[single])
    return win.astype(np.int64), out


def _single_scores(s: np.ndarray, post: str, wri: np.ndarray) -> np.ndarray:
    """Two columns from one score per row, by onnxruntime's `write_additional_scores` code."""
    out = np.zeros((s.size, 2), dtype=np.float32)
    if post == "PROBIT":
        out[:, 0] = ort_probit(s)
        return out
    low = (wri == 0) | (wri == 1)
    mixed = (wri == 2) | (wri == 3)
    out[low] = expand_binary(s[low], post, 0)
    out[mixed] = expand_binary(s[mixed], post, 2)
    none = ~(low | mixed)
    out[none, 0] = s[none]
    return out


@register("TreeEnsembleClassifier", domain=ML, since=1, until=4)
def tree_ensemble_classifier(X: np.ndarray, base_values: Optional[List[float]] = None,
                             base_values_as_tensor: Optional[np.ndarray] = None,
                             class_ids: Optional[List[int]] = None,
                             class_nodeids: Optional[List[int]] = None,
                             class_treeids: Optional[List[int]] = None,
                             class_weights: Optional[List[float]] = None,
                             class_weights_as_tensor: Optional[np.ndarray] = None,
                             classlabels_int64s: Optional[List[int]] = None,
                             classlabels_strings: Optional[List[str]] = None,
                             nodes_falsenodeids: Optional[List[int]] = None,
                             nodes_featureids: Optional[List[int]] = None,
                             nodes_hitrates: Optional[List[float]] = None,
                             nodes_hitrates_as_tensor: Optional[np.ndarray] = None,
                             nodes_missing_value_tracks_true: Optional[List[int]] = None,
                             nodes_modes: Optional[List[str]] = None,
                             nodes_nodeids: Optional[List[int]] = None,
                             nodes_treeids: Optional[List[int]] = None,
                             nodes_truenodeids: Optional[List[int]] = None,
                             nodes_values: Optional[List[float]] = None,
                             nodes_values_as_tensor: Optional[np.ndarray] = None,
                             post_transform: Any = "NONE"):
    """TreeEnsembleClassifier-1/3: (labels, scores); leaf class weights summed over the trees,
    plus base_values, post-transformed; a model whose leaves name one class of two is binary."""
    op = "TreeEnsembleClassifier"
    post = transform_code(op, post_transform)
    labels = class_labels(op, classlabels_strings, classlabels_int64s)
    k = len(labels)
    if k < 2:
        raise NotImplemented("%s: a classifier with %d class label is not supported" % (op, k))
    attrs = _attrs(nodes_treeids=nodes_treeids, nodes_nodeids=nodes_nodeids,
                   nodes_featureids=nodes_featureids, nodes_modes=nodes_modes,
                   nodes_truenodeids=nodes_truenodeids, nodes_falsenodeids=nodes_falsenodeids,
                   nodes_values=nodes_values, nodes_values_as_tensor=nodes_values_as_tensor,
                   nodes_missing_value_tracks_true=nodes_missing_value_tracks_true,
                   class_ids=class_ids, class_treeids=class_treeids, class_nodeids=class_nodeids,
                   class_weights=class_weights, class_weights_as_tensor=class_weights_as_tensor)
    forest = build_forest(op, attrs, k, "class")
    base = _pick(op, "base_values", base_values, base_values_as_tensor, required=False)
    base = [] if base is None else base.tolist()
    leaf, dtype = _evaluate(op, X, forest, "SUM", int(forest.feature.max(initial=0)))
    acc, has = _accumulate(forest, leaf, "SUM", dtype)
    if k > 2:
        nb = min(len(base), k)
        if nb:
            acc[:, :nb] += np.asarray(base[:nb], dtype=dtype)
            has[:, :nb] = True
        masked = np.where(has, acc, -np.inf)
        y = labels[np.argmax(masked, axis=1)]
        return y, apply_transform(np.where(has, acc, 0).astype(np.float32), post)
    binary_case = np.unique(np.asarray(class_ids or [], dtype=np.int64)).size == 1
    raw = _pick(op, "class_weights", class_weights, class_weights_as_tensor, required=False)
    all_positive = raw is None or bool((raw >= 0).all())
    win, scores = _binary_scores(acc, has, base, post, binary_case, all_positive)
    if binary_case or labels.dtype == object:
        return labels[win], scores
    return win, scores          # onnxruntime answers 1 / 0 here, not the class labels
