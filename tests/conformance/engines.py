"""The runtimes a case runs on (onnxedge, onnxruntime) and the per-case timeout guard."""
from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence


class CaseTimeout(Exception):
    """A case ran past its time limit."""


class Engine(NamedTuple):
    """A runtime: `prepare(model_bytes)` returns `run(feeds) -> outputs in graph order`."""

    name: str          # "onnxedge" or "onnxruntime"
    version: str
    provider: str
    prepare: Callable[[bytes], Callable[[Dict[str, Any]], List[Any]]]


def onnxedge_engine(provider: str = "CPUExecutionProvider") -> Engine:
    """onnxedge's InferenceSession on one execution provider (CPU is the fallback it adds)."""
    import onnxedge

    def prepare(model: bytes) -> Callable[[Dict[str, Any]], List[Any]]:
        sess = onnxedge.InferenceSession(model, providers=[provider])
        return lambda feeds: list(sess.run(None, feeds))
    return Engine("onnxedge", getattr(onnxedge, "__version__", "?"), provider, prepare)


def _same_values(a: Any, b: Any) -> bool:
    """Bitwise-equal outputs (arrays, NaNs included; sequences, maps and None recursively)."""
    import numpy as np
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.shape == b.shape and (a.dtype == object and a.tolist() == b.tolist()
                                            or a.dtype != object and a.tobytes() == b.tobytes()))
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(
            _same_values(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(
            _same_values(a[k], b[k]) for k in a)
    return a == b or (a != a and b != b)


def onnxedge_oxe_engine(provider: str = "CPUExecutionProvider") -> Engine:
    """onnxedge on each model round-tripped through `.oxe`: `.onnx` -> IR -> `.oxe` bytes, and
    `.oxe` -> IR -> `.onnx` bytes (onnx_writer).

    Runs a session on the `.oxe` bytes and one on the `.onnx` bytes made back from them; their
    outputs must be bitwise equal (else RuntimeError), and the `.oxe` session's are returned.
    A model onnx.checker accepts must still be accepted after the round trip.
    """
    import onnxedge
    from onnxedge import format as oxe
    from onnxedge import onnx_loader, onnx_writer

    def prepare(model: bytes) -> Callable[[Dict[str, Any]], List[Any]]:
        oxe_bytes = oxe.to_bytes(onnx_loader.load_model(model))
        back = onnx_writer.model_to_proto(oxe.load(oxe_bytes))
        _checker_still_accepts(model, back)
        sess = onnxedge.InferenceSession(oxe_bytes, providers=[provider])
        sess_back = onnxedge.InferenceSession(back.SerializeToString(), providers=[provider])

        def run(feeds: Dict[str, Any]) -> List[Any]:
            got = list(sess.run(None, feeds))
            again = list(sess_back.run(None, feeds))
            if not _same_values(got, again):
                raise RuntimeError(".oxe -> .onnx round trip changed the outputs")
            return got
        return run
    return Engine("onnxedge-oxe", getattr(onnxedge, "__version__", "?"), provider, prepare)


def _checker_still_accepts(original: bytes, back: Any) -> None:
    import onnx
    try:
        onnx.checker.check_model(onnx.load_from_string(original))
    except Exception:   # the original is not checker-clean: nothing to compare against
        return
    try:
        onnx.checker.check_model(back)
    except Exception as e:
        raise RuntimeError("onnx.checker refuses the model after .onnx -> .oxe -> .onnx: %s"
                           % str(e).splitlines()[0]) from None


def onnxruntime_engine(provider: str = "CPUExecutionProvider") -> Engine:
    """onnxruntime (one intra-op thread) on one execution provider; None feeds are left out."""
    import onnxruntime as ort
    ort.set_default_logger_severity(4)   # failures are reported as results, not logged

    def prepare(model: bytes) -> Callable[[Dict[str, Any]], List[Any]]:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 4
        sess = ort.InferenceSession(model, opts, providers=[provider])

        def run(feeds: Dict[str, Any]) -> List[Any]:
            return list(sess.run(None, {k: v for k, v in feeds.items() if v is not None}))
        return run
    return Engine("onnxruntime", ort.__version__, provider, prepare)


def make_engine(name: str, provider: str = "CPUExecutionProvider") -> Engine:
    """An engine by name: onnxedge, onnxedge-oxe or onnxruntime."""
    if name == "onnxedge":
        return onnxedge_engine(provider)
    if name == "onnxruntime":
        return onnxruntime_engine(provider)
    if name == "onnxedge-oxe":
        return onnxedge_oxe_engine(provider)
    raise ValueError("unknown engine %r (expected onnxedge, onnxedge-oxe or onnxruntime)" % name)


def _interrupt(thread: threading.Thread) -> None:
    """Raise CaseTimeout inside `thread` at its next Python bytecode (long C calls finish first)."""
    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                                   ctypes.py_object(CaseTimeout))


def call_with_timeout(fn: Callable[[], Any], seconds: Optional[float]) -> Any:
    """fn() in a watchdog thread; CaseTimeout when it runs longer than `seconds` (None: no limit).

    The stuck thread is interrupted, and being a daemon it never keeps the process alive.
    """
    if not seconds:
        return fn()
    box: Dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: B902 (re-raised in the caller's thread)
            box["error"] = e
    worker = threading.Thread(target=target, name="conformance-case", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        _interrupt(worker)
        worker.join(1.0)
        raise CaseTimeout("ran longer than %gs" % seconds)
    if "error" in box:
        raise box["error"]
    return box.get("value")


def run_data_set(engine_run: Callable[[Dict[str, Any]], List[Any]], input_names: Sequence[str],
                 inputs: Sequence[Any]) -> List[Any]:
    """Run one data set: feeds keyed by the graph's (non-initializer) input names."""
    return engine_run(dict(zip(input_names, inputs)))
