// Tiled batched GEMM: Y[b] = act(alpha * A[b] @ B[b] + beta * C), 64x64 output tiles per
// workgroup (16x16 threads, 4x4 outputs each), K in steps of 16 through workgroup memory.
// A, B and C are read through strides (transposes and broadcast batches cost nothing).
// LOAD_A / LOAD_B fill the tiles: scalar loads through strides, or vec4 loads along a
// contiguous dimension that is a multiple of 4 (TA / TB are then vec4 element types).
{{ENABLE}}
struct U { M: u32, N: u32, K: u32, nbatch_dims: u32,
           alpha: f32, beta: f32, act_a: f32, act_b: f32,
           sam: u32, sak: u32, sbk: u32, sbn: u32,
           scm: u32, scn: u32, p0: u32, p1: u32,
           bdims: array<vec4<u32>, 1>, sab: array<vec4<u32>, 1>, sbb: array<vec4<u32>, 1> }
@group(0) @binding(0) var<storage, read> A: array<{{TA}}>;
@group(0) @binding(1) var<storage, read> B: array<{{TB}}>;
{{BIAS_DECL}}
@group(0) @binding({{OUT_BINDING}}) var<storage, read_write> Y: array<{{T}}>;
@group(0) @binding({{U_BINDING}}) var<uniform> u: U;

var<workgroup> As: array<array<f32, 65>, 16>;
var<workgroup> Bs: array<array<f32, 64>, 16>;

fn act(v: f32) -> f32 {
  {{ACT}}
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  // batch offsets from the batch index (broadcast batches have stride 0)
  var rem = wg.z;
  var a_off = 0u;
  var b_off = 0u;
  for (var k = i32(u.nbatch_dims) - 1; k >= 0; k = k - 1) {
    let d = u.bdims[k / 4][k % 4];
    let c = rem % d;
    rem = rem / d;
    a_off = a_off + c * u.sab[k / 4][k % 4];
    b_off = b_off + c * u.sbb[k / 4][k % 4];
  }
  let row0 = wg.y * 64u;
  let col0 = wg.x * 64u;
  let tid = lid.y * 16u + lid.x;
  var acc: array<array<f32, 4>, 4>;
  for (var i = 0u; i < 4u; i = i + 1u) {
    for (var j = 0u; j < 4u; j = j + 1u) { acc[i][j] = 0.0; }
  }
  for (var k0 = 0u; k0 < u.K; k0 = k0 + 16u) {
    // 1024 elements of each tile: 4 scalars or one vec4 per thread
    {{LOAD_A}}
    {{LOAD_B}}
    workgroupBarrier();
    for (var kk = 0u; kk < 16u; kk = kk + 1u) {
      var a4: array<f32, 4>;
      var b4: array<f32, 4>;
      for (var i = 0u; i < 4u; i = i + 1u) {
        a4[i] = As[kk][lid.y * 4u + i];
        b4[i] = Bs[kk][lid.x * 4u + i];
      }
      for (var i = 0u; i < 4u; i = i + 1u) {
        for (var j = 0u; j < 4u; j = j + 1u) { acc[i][j] = acc[i][j] + a4[i] * b4[j]; }
      }
    }
    workgroupBarrier();
  }
  let y_off = wg.z * u.M * u.N;
  for (var i = 0u; i < 4u; i = i + 1u) {
    let m = row0 + lid.y * 4u + i;
    if (m >= u.M) { continue; }
    for (var j = 0u; j < 4u; j = j + 1u) {
      let n = col0 + lid.x * 4u + j;
      if (n >= u.N) { continue; }
      var v = u.alpha * acc[i][j];
      {{BIAS_ADD}}
      Y[y_off + m * u.N + n] = {{T}}(act(v));
    }
  }
}
