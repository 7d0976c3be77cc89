"""String ops: StringNormalizer, StringConcat, StringSplit, RegexFullMatch, TfIdfVectorizer.

String tensors are numpy object arrays of Python str (bytes are decoded as UTF-8).
RegexFullMatch uses Python's `re`, which agrees with RE2 on the common syntax.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..errors import InvalidArgument
from ._util import broadcast_shape, check_tensor_bytes
from .registry import register


def _text(v: object) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


def _strings(op: str, x: np.ndarray, what: str = "input") -> np.ndarray:
    x = np.asarray(x)
    if x.dtype != object and x.dtype.kind not in "US":
        raise InvalidArgument("%s: %s must be a string tensor, got %s" % (op, what, x.dtype))
    return x


def _object_array(items: List[str], shape: tuple) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out.reshape(shape)


@register("StringNormalizer", since=10)
def string_normalizer(X: np.ndarray, case_change_action: str = "NONE", is_case_sensitive: int = 0,
                      locale: str = "", stopwords: Optional[List[str]] = None) -> np.ndarray:
    """StringNormalizer-10: drop stopwords, then change case; [C] or [1, C] in and out."""
    op = "StringNormalizer"
    x = _strings(op, X)
    if x.ndim not in (1, 2) or (x.ndim == 2 and x.shape[0] != 1):
        raise InvalidArgument("%s: input must have shape [C] or [1, C], got %s" % (op, x.shape))
    action = _text(case_change_action).upper()
    if action not in ("NONE", "LOWER", "UPPER"):
        raise InvalidArgument("%s: case_change_action %r is not NONE, LOWER or UPPER" % (op, action))
    words = [_text(v) for v in x.reshape(-1).tolist()]
    stops = [_text(s) for s in (stopwords or [])]
    if is_case_sensitive:
        stop_set = set(stops)
        kept = [w for w in words if w not in stop_set]
    else:
        stop_set = {s.lower() for s in stops}
        kept = [w for w in words if w.lower() not in stop_set]
    if action == "LOWER":
        kept = [w.lower() for w in kept]
    elif action == "UPPER":
        kept = [w.upper() for w in kept]
    if not kept:
        kept = [""]
    shape = (len(kept),) if x.ndim == 1 else (1, len(kept))
    return _object_array(kept, shape)


@register("StringConcat", since=20)
def string_concat(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """StringConcat-20: elementwise X + Y with numpy broadcasting."""
    op = "StringConcat"
    x, y = _strings(op, X, "X"), _strings(op, Y, "Y")
    shape = broadcast_shape([x.shape, y.shape], op)
    xb, yb = np.broadcast_to(x, shape).reshape(-1), np.broadcast_to(y, shape).reshape(-1)
    return _object_array([_text(a) + _text(b) for a, b in zip(xb.tolist(), yb.tolist())], shape)


@register("StringSplit", since=20)
def string_split(X: np.ndarray, delimiter: Optional[str] = None, maxsplit: Optional[int] = None):
    """StringSplit-20: split each string (on `delimiter`, or whitespace runs); pad with ""."""
    op = "StringSplit"
    x = _strings(op, X)
    delim = _text(delimiter) if delimiter is not None else ""
    limit = -1 if maxsplit is None else int(maxsplit)
    if limit < -1:
        raise InvalidArgument("%s: maxsplit must be >= 0, got %d" % (op, limit))
    parts = [(_text(s).split(delim, limit) if delim else _text(s).split(None, limit))
             for s in x.reshape(-1).tolist()]
    width = max([len(p) for p in parts] or [0])
    flat = [q for p in parts for q in p + [""] * (width - len(p))]
    counts = np.array([len(p) for p in parts], dtype=np.int64).reshape(x.shape)
    return _object_array(flat, x.shape + (width,)), counts


@register("RegexFullMatch", since=20)
def regex_full_match(X: np.ndarray, pattern: Optional[str] = None) -> np.ndarray:
    """RegexFullMatch-20: whether each string matches `pattern` in full."""
    op = "RegexFullMatch"
    x = _strings(op, X)
    if pattern is None:
        raise InvalidArgument("%s: the attribute 'pattern' is required" % op)
    try:
        rx = re.compile(_text(pattern))
    except re.error as e:
        raise InvalidArgument("%s: pattern %r is not a valid regular expression: %s"
                              % (op, _text(pattern), e)) from None
    flags = [rx.fullmatch(_text(s)) is not None for s in x.reshape(-1).tolist()]
    return np.array(flags, dtype=bool).reshape(x.shape)


def _ngram_table(op: str, ngram_counts: List[int], ngram_indexes: List[int],
                 pool: List) -> Dict[Tuple, int]:
    """{n-gram tuple: output column} from the flattened pool and its per-length start offsets."""
    table: Dict[Tuple, int] = {}
    k = 0
    starts = list(ngram_counts) + [len(pool)]
    for level in range(len(ngram_counts)):
        n = level + 1
        begin, end = int(starts[level]), int(starts[level + 1])
        if end < begin or (end - begin) % n:
            raise InvalidArgument("%s: ngram_counts %s do not split a pool of %d items into %d-grams"
                                  % (op, list(ngram_counts), len(pool), n))
        for i in range(begin, end, n):
            if k >= len(ngram_indexes):
                raise InvalidArgument("%s: ngram_indexes has %d entries, fewer than the pool's "
                                      "n-grams" % (op, len(ngram_indexes)))
            table[tuple(pool[i:i + n])] = int(ngram_indexes[k])
            k += 1
    return table


@register("TfIdfVectorizer", since=9)
def tfidf_vectorizer(X: np.ndarray, max_gram_length: int = 0, max_skip_count: int = 0,
                     min_gram_length: int = 0, mode: str = "TF",
                     ngram_counts: Optional[List[int]] = None,
                     ngram_indexes: Optional[List[int]] = None,
                     pool_int64s: Optional[List[int]] = None,
                     pool_strings: Optional[List[str]] = None,
                     weights: Optional[List[float]] = None) -> np.ndarray:
    """TfIdfVectorizer-9: counts (TF), weights (IDF) or both (TFIDF) of pooled (skip-)n-grams."""
    op = "TfIdfVectorizer"
    x = np.asarray(X)
    if x.ndim not in (1, 2):
        raise InvalidArgument("%s: input must have shape [C] or [N, C], got %s" % (op, x.shape))
    if mode not in ("TF", "IDF", "TFIDF"):
        raise InvalidArgument("%s: mode %r is not TF, IDF or TFIDF" % (op, mode))
    if not ngram_indexes or ngram_counts is None:
        raise InvalidArgument("%s: ngram_counts and ngram_indexes are required" % op)
    if pool_strings is not None:
        pool = [_text(s) for s in pool_strings]
        x2 = x.reshape(1, -1) if x.ndim == 1 else x
        rows = [[_text(v) for v in r] for r in x2.tolist()]
    elif pool_int64s is not None:
        pool = [int(v) for v in pool_int64s]
        rows = x.astype(np.int64).tolist() if x.ndim == 2 else [x.astype(np.int64).tolist()]
    else:
        raise InvalidArgument("%s: one of pool_int64s or pool_strings is required" % op)
    table = _ngram_table(op, ngram_counts, ngram_indexes, pool)
    size = max(int(i) for i in ngram_indexes) + 1
    lo, hi = max(1, int(min_gram_length)), int(max_gram_length)
    if hi < lo:
        raise InvalidArgument("%s: max_gram_length %d is below min_gram_length %d" % (op, hi, lo))
    check_tensor_bytes(op, [len(rows), size], np.float64)
    counts = np.zeros((len(rows), size), dtype=np.float64)
    for r, row in enumerate(rows):
        c = len(row)
        for n in range(lo, hi + 1):
            for skip in range(int(max_skip_count) + 1 if n > 1 else 1):
                d = skip + 1
                for start in range(0, c - (n - 1) * d):
                    col = table.get(tuple(row[start:start + (n - 1) * d + 1:d]))
                    if col is not None:
                        counts[r, col] += 1
    w = np.ones(size) if not weights else np.asarray(weights, dtype=np.float64)
    if w.shape[0] < size:
        raise InvalidArgument("%s: weights has %d entries, expected %d" % (op, w.shape[0], size))
    w = w[:size]
    if mode == "IDF":
        out = (counts > 0) * w
    elif mode == "TFIDF":
        out = counts * w
    else:
        out = counts
    out = out.astype(np.float32)
    return out if x.ndim == 2 else out[0]
