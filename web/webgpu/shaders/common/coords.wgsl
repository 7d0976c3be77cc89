// Flat index <-> coordinates, for shapes and strides packed as array<vec4<...>, 2> (rank <= 8)
// in a uniform (dim k is v[k / 4][k % 4]). Shaders include this file (see template.py).

// The row-major coordinates of flat index i in the first `rank` dims of `shape`.
fn coords_of(i: u32, rank: u32, shape: array<vec4<u32>, 2>) -> array<vec4<u32>, 2> {
  var c = array<vec4<u32>, 2>(vec4<u32>(0u), vec4<u32>(0u));
  var rem = i;
  for (var k = i32(rank) - 1; k >= 0; k = k - 1) {
    let d = shape[k / 4][k % 4];
    c[k / 4][k % 4] = rem % d;
    rem = rem / d;
  }
  return c;
}

// sum over the first `rank` dims of c_k * st_k: the element offset of coordinates c.
fn offset_of(c: array<vec4<u32>, 2>, rank: u32, st: array<vec4<u32>, 2>) -> u32 {
  var off = 0u;
  for (var k = 0; k < i32(rank); k = k + 1) {
    off = off + c[k / 4][k % 4] * st[k / 4][k % 4];
  }
  return off;
}

// offset_of(coords_of(i, rank, shape), rank, st) in one pass.
fn strided_offset(i: u32, rank: u32, shape: array<vec4<u32>, 2>, st: array<vec4<u32>, 2>) -> u32 {
  var off = 0u;
  var rem = i;
  for (var k = i32(rank) - 1; k >= 0; k = k - 1) {
    let d = shape[k / 4][k % 4];
    off = off + (rem % d) * st[k / 4][k % 4];
    rem = rem / d;
  }
  return off;
}
