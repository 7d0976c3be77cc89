// Reductions, one output element per invocation: the kept coordinates pick a base offset, the
// loop walks every coordinate of the reduced axes. INIT / STEP / FINISH make Sum, Mean, Max,
// Min, Prod, L1, L2, SumSquare, LogSumExp.
{{ENABLE}}
//#include "common/coords.wgsl"
struct U { n: u32, krank: u32, rrank: u32, count: u32,
           kshape: array<vec4<u32>, 2>, kstride: array<vec4<u32>, 2>,
           rshape: array<vec4<u32>, 2>, rstride: array<vec4<u32>, 2> }
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> Y: array<{{T}}>;
@group(0) @binding(2) var<uniform> u: U;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= u.n) { return; }
  let base = strided_offset(i, u.krank, u.kshape, u.kstride);
  var acc = {{INIT}};
  {{PRE}}
  for (var r = 0u; r < u.count; r = r + 1u) {
    let off = base + strided_offset(r, u.rrank, u.rshape, u.rstride);
    let v = f32(X[off]);
    {{STEP}}
  }
  {{FINISH}}
  Y[i] = {{T}}(acc);
}
