"""WGSL snippets that fill the 64x16 (A) and 16x64 (B) workgroup tiles of the tiled GEMM
shaders (matmul.wgsl, conv.wgsl): scalar loads through any strides, or one vec4 load per
thread along a contiguous dimension whose length is a multiple of 4.

Each takes the element index of A[m, k] / B[k, n] as a WGSL expression over `m`, `k`, `n`
(already offset into the batch) and the bounds `u.M`, `u.N`, `u.K`; a vec4 index must be a
multiple of 4 for every in-range m/k/n (the caller checks strides and offsets).
"""
from __future__ import annotations

# The tiles are As[k][m] (16 x 65) and Bs[k][n] (16 x 64); 256 threads, `tid` their index.

_A_SCALAR = """for (var e = 0u; e < 4u; e = e + 1u) {
      let idx = tid + e * 256u;
      let m = row0 + idx / 16u;
      let k = k0 + idx % 16u;
      var av = 0.0;
      if (m < u.M && k < u.K) { av = f32(A[{IDX}]); }
      As[idx % 16u][idx / 16u] = av;
    }"""

_A_VEC_K = """{
      let am = tid / 4u;
      let ak = (tid % 4u) * 4u;
      let m = row0 + am;
      let k = k0 + ak;
      var av = vec4<f32>(0.0);
      if (m < u.M && k < u.K) { av = vec4<f32>(A[({IDX}) / 4u]); }
      As[ak][am] = av.x;
      As[ak + 1u][am] = av.y;
      As[ak + 2u][am] = av.z;
      As[ak + 3u][am] = av.w;
    }"""

_B_SCALAR = """for (var e = 0u; e < 4u; e = e + 1u) {
      let idx = tid + e * 256u;
      let k = k0 + idx / 64u;
      let n = col0 + idx % 64u;
      var bv = 0.0;
      if (k < u.K && n < u.N) { bv = f32(B[{IDX}]); }
      Bs[idx / 64u][idx % 64u] = bv;
    }"""

_B_VEC_N = """{
      let bk = tid / 16u;
      let bn = (tid % 16u) * 4u;
      let k = k0 + bk;
      let n = col0 + bn;
      var bv = vec4<f32>(0.0);
      if (k < u.K && n < u.N) { bv = vec4<f32>(B[({IDX}) / 4u]); }
      Bs[bk][bn] = bv.x;
      Bs[bk][bn + 1u] = bv.y;
      Bs[bk][bn + 2u] = bv.z;
      Bs[bk][bn + 3u] = bv.w;
    }"""

_B_VEC_K = """{
      let bn = tid / 4u;
      let bk = (tid % 4u) * 4u;
      let k = k0 + bk;
      let n = col0 + bn;
      var bv = vec4<f32>(0.0);
      if (k < u.K && n < u.N) { bv = vec4<f32>(B[({IDX}) / 4u]); }
      Bs[bk][bn] = bv.x;
      Bs[bk + 1u][bn] = bv.y;
      Bs[bk + 2u][bn] = bv.z;
      Bs[bk + 3u][bn] = bv.w;
    }"""


def load_a(index: str, vec_k: bool) -> str:
    """Fill As from A[index(m, k)]; vec_k: vec4 loads along k (K % 4 == 0, k contiguous)."""
    return (_A_VEC_K if vec_k else _A_SCALAR).replace("{IDX}", index)


def load_b(index: str, vec: str = "") -> str:
    """Fill Bs from B[index(k, n)]; vec "n" / "k": vec4 loads along that contiguous axis."""
    return {"": _B_SCALAR, "n": _B_VEC_N, "k": _B_VEC_K}[vec].replace("{IDX}", index)


def element(t: str, vec: bool) -> str:
    """The storage array element type: t, or vec4<t> for vec4 loads."""
    return "vec4<%s>" % t if vec else t


def all_multiple_of_4(*values: int) -> bool:
    """True when every value (strides, offsets, lengths) is a multiple of 4."""
    return all(int(v) % 4 == 0 for v in values)


__all__ = ["load_a", "load_b", "element", "all_multiple_of_4"]
