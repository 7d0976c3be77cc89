"""Limits the threads of numpy's BLAS (OpenBLAS, MKL, BLIS), which does onnxedge's heavy math.

`SessionOptions.intra_op_num_threads` lands here. The setting is process-wide (numpy has one
BLAS), so the last session created with a non-zero value decides. Without a BLAS (Pyodide) this
is a no-op. Uses `threadpoolctl` when installed, otherwise the libraries' own C entry points.
"""
from __future__ import annotations

import os
from typing import List, Optional

_SETTERS = ("openblas_set_num_threads", "openblas_set_num_threads64_",
            "scipy_openblas_set_num_threads", "scipy_openblas_set_num_threads64_",
            "MKL_Set_Num_Threads", "bli_thread_set_num_threads")


def _loaded_blas_paths() -> List[str]:
    paths = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.rsplit(None, 1)[-1]
                low = os.path.basename(p).lower()
                if p.startswith("/") and any(k in low for k in ("openblas", "mkl_rt", "blis")) \
                        and p not in paths:
                    paths.append(p)
    except OSError:
        pass
    return paths


def set_blas_threads(n: int) -> Optional[int]:
    """Ask numpy's BLAS to use `n` threads; returns how many libraries took it (None: no BLAS)."""
    if n <= 0:
        return None
    import numpy  # noqa: F401  (loads the BLAS so it can be found)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        pass
    else:
        threadpool_limits(limits=n, user_api="blas")
        return 1
    try:
        import ctypes
    except ImportError:   # Pyodide 0.17 has no ctypes (and no BLAS)
        return None
    done = 0
    for path in _loaded_blas_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _SETTERS:
            fn = getattr(lib, name, None)
            if fn is not None:
                fn(ctypes.c_int(n))
                done += 1
                break
    return done or None
