// Where(cond, x, y) with numpy broadcasting of all three inputs.
{{ENABLE}}
//#include "common/coords.wgsl"
struct U { n: u32, rank: u32, p0: u32, p1: u32, shape: array<vec4<u32>, 2>,
           sc: array<vec4<u32>, 2>, sx: array<vec4<u32>, 2>, sy: array<vec4<u32>, 2> }
@group(0) @binding(0) var<storage, read> cs: array<u32>;
@group(0) @binding(1) var<storage, read> xs: array<{{T}}>;
@group(0) @binding(2) var<storage, read> ys: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(4) var<uniform> u: U;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= u.n) { return; }
  let c = coords_of(i, u.rank, u.shape);
  let ic = offset_of(c, u.rank, u.sc);
  let ix = offset_of(c, u.rank, u.sx);
  let iy = offset_of(c, u.rank, u.sy);
  out[i] = select(ys[iy], xs[ix], cs[ic] != 0u);
}
