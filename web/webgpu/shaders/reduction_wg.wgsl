// Reductions over long ranges, one workgroup of 256 per output element: each thread strides over
// the reduced coordinates (INIT / STEP as in reduction.wgsl), the partial results meet in a
// workgroup-memory tree (COMBINE of a and b), and thread 0 applies FINISH and writes.
{{ENABLE}}
//#include "common/coords.wgsl"
struct U { n: u32, krank: u32, rrank: u32, count: u32,
           kshape: array<vec4<u32>, 2>, kstride: array<vec4<u32>, 2>,
           rshape: array<vec4<u32>, 2>, rstride: array<vec4<u32>, 2> }
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> Y: array<{{T}}>;
@group(0) @binding(2) var<uniform> u: U;

const WG = 256u;
var<workgroup> part: array<f32, 256>;

fn combine(a: f32, b: f32) -> f32 {
  return {{COMBINE}};
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = wg.x + wg.y * nwg.x;
  if (i >= u.n) { return; }
  let lid = lid3.x;
  let base = strided_offset(i, u.krank, u.kshape, u.kstride);
  var acc = {{INIT}};
  for (var r = lid; r < u.count; r = r + WG) {
    let off = base + strided_offset(r, u.rrank, u.rshape, u.rstride);
    let v = f32(X[off]);
    {{STEP}}
  }
  part[lid] = acc;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s >> 1u) {
    if (lid < s) { part[lid] = combine(part[lid], part[lid + s]); }
    workgroupBarrier();
  }
  if (lid == 0u) {
    acc = part[0];
    {{FINISH}}
    Y[i] = {{T}}(acc);
  }
}
