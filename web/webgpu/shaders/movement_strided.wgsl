// Strided copy: for every coordinate c of `shape`, Y[dst_base + sum c_k * ds_k] =
// X[src_base + sum (c_k % mod_k) * ss_k]. Serves Transpose, Slice (negative steps), Expand,
// Tile (mod), Concat (dst offsets) and Split (src offsets).
{{ENABLE}}
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
  var rem = i;
  var src = i32(u.src_base);
  var dst = u.dst_base;
  for (var k = i32(u.rank) - 1; k >= 0; k = k - 1) {
    let d = u.shape[k / 4][k % 4];
    let c = rem % d;
    rem = rem / d;
    src = src + i32(c % u.mods[k / 4][k % 4]) * u.ss[k / 4][k % 4];
    dst = dst + c * u.ds[k / 4][k % 4];
  }
  Y[dst] = X[u32(src)];
}
