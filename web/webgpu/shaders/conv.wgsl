// Conv2D as an implicit GEMM (1-D convolutions run with H = 1): per batch image and group,
// Y[co, p] = act(sum_k W[co, k] * X[k, p] + bias[co]) with k = (ci, kh, kw) and p = (oh, ow);
// (+ Z, a residual of Y's shape, before the activation). X's column is gathered on the fly (zero
// outside the padded input). 64x64 tiles, K step 16. A is the weight W, B the image X; LOAD_A /
// LOAD_B fill the tiles (vec4 loads of W when K % 4 == 0, of X for pointwise convolutions).
{{ENABLE}}
struct U { M: u32, N: u32, K: u32, groups: u32,
           C: u32, H: u32, W: u32, OW: u32,
           KH: u32, KW: u32, sh: u32, sw: u32,
           ph: u32, pw: u32, dh: u32, dw: u32,
           act_a: f32, act_b: f32, cin_g: u32, p0: u32 }
@group(0) @binding(0) var<storage, read> B: array<{{TB}}>;
@group(0) @binding(1) var<storage, read> A: array<{{TA}}>;
{{BIAS_DECL}}
{{Z_DECL}}
@group(0) @binding({{OUT_BINDING}}) var<storage, read_write> Y: array<{{T}}>;
@group(0) @binding({{U_BINDING}}) var<uniform> u: U;

var<workgroup> As: array<array<f32, 65>, 16>;
var<workgroup> Bs: array<array<f32, 64>, 16>;

fn act(v: f32) -> f32 {
  {{ACT}}
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let nb = wg.z / u.groups;
  let g = wg.z % u.groups;
  let x_off = (nb * u.C + g * u.cin_g) * u.H * u.W;
  let w_off = g * u.M * u.K;
  let khw = u.KH * u.KW;
  let row0 = wg.y * 64u;
  let col0 = wg.x * 64u;
  let tid = lid.y * 16u + lid.x;
  var acc: array<array<f32, 4>, 4>;
  for (var i = 0u; i < 4u; i = i + 1u) {
    for (var j = 0u; j < 4u; j = j + 1u) { acc[i][j] = 0.0; }
  }
  for (var k0 = 0u; k0 < u.K; k0 = k0 + 16u) {
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
  let y_off = (nb * u.groups + g) * u.M * u.N;
  for (var i = 0u; i < 4u; i = i + 1u) {
    let m = row0 + lid.y * 4u + i;
    if (m >= u.M) { continue; }
    for (var j = 0u; j < 4u; j = j + 1u) {
      let p = col0 + lid.x * 4u + j;
      if (p >= u.N) { continue; }
      var v = acc[i][j];
      {{BIAS_ADD}}
      {{Z_ADD}}
      Y[y_off + m * u.N + p] = {{T}}(act(v));
    }
  }
}
