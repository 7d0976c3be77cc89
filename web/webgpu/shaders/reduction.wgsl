// Reductions, one output element per invocation: the kept coordinates pick a base offset, the
// loop walks every coordinate of the reduced axes. INIT / STEP / FINISH make Sum, Mean, Max,
// Min, Prod, L1, L2, SumSquare, LogSumExp.
{{ENABLE}}
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
  var rem = i;
  var base = 0u;
  for (var k = i32(u.krank) - 1; k >= 0; k = k - 1) {
    let d = u.kshape[k / 4][k % 4];
    base = base + (rem % d) * u.kstride[k / 4][k % 4];
    rem = rem / d;
  }
  var acc = {{INIT}};
  {{PRE}}
  for (var r = 0u; r < u.count; r = r + 1u) {
    var rr = r;
    var off = base;
    for (var k = i32(u.rrank) - 1; k >= 0; k = k - 1) {
      let d = u.rshape[k / 4][k % 4];
      off = off + (rr % d) * u.rstride[k / 4][k % 4];
      rr = rr / d;
    }
    let v = f32(X[off]);
    {{STEP}}
  }
  {{FINISH}}
  Y[i] = {{T}}(acc);
}
