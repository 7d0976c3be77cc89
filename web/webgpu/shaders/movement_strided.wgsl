// Strided copy: for every coordinate c of `shape`, Y[dst_base + sum c_k * ds_k] =
// X[src_base + sum (c_k % mod_k) * ss_k]. Serves Transpose, Slice (negative steps), Expand,
// Tile (mod), Concat (dst offsets) and Split (src offsets).
{{ENABLE}}
//#include "common/coords.wgsl"
struct U { n: u32, rank: u32, src_base: u32, dst_base: u32,
           shape: array<vec4<u32>, 2>, ss: array<vec4<i32>, 2>,
           mods: array<vec4<u32>, 2>, ds: array<vec4<u32>, 2> }
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> Y: array<{{T}}>;
@group(0) @binding(2) var<uniform> u: U;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= u.n) { return; }
  let c = coords_of(i, u.rank, u.shape);
  var src = i32(u.src_base);
  for (var k = 0; k < i32(u.rank); k = k + 1) {
    src = src + i32(c[k / 4][k % 4] % u.mods[k / 4][k % 4]) * u.ss[k / 4][k % 4];
  }
  let dst = u.dst_base + offset_of(c, u.rank, u.ds);
  Y[dst] = X[u32(src)];
}
