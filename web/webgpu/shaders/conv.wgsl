// Conv2D as an implicit GEMM (1-D convolutions run with H = 1): per batch image and group,
// Y[co, p] = act(sum_k W[co, k] * X[k, p] + bias[co]) with k = (ci, kh, kw) and p = (oh, ow);
// (+ Z, a residual of Y's shape, before the activation). X's column is gathered on the fly (zero outside the padded input). 64x64 tiles, K step 16.
{{ENABLE}}
struct U { M: u32, N: u32, K: u32, groups: u32,
           C: u32, H: u32, W: u32, OW: u32,
           KH: u32, KW: u32, sh: u32, sw: u32,
           ph: u32, pw: u32, dh: u32, dw: u32,
           act_a: f32, act_b: f32, cin_g: u32, p0: u32 }
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read> Wt: array<{{T}}>;
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
  let n = wg.z / u.groups;
  let g = wg.z % u.groups;
  let x_off = (n * u.C + g * u.cin_g) * u.H * u.W;
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
    for (var e = 0u; e < 4u; e = e + 1u) {
      let idx = tid + e * 256u;
      let am = idx / 16u;
      let ak = idx % 16u;
      let gm = row0 + am;
      let gk = k0 + ak;
      var av = 0.0;
      if (gm < u.M && gk < u.K) { av = f32(Wt[w_off + gm * u.K + gk]); }
      As[ak][am] = av;
      let bk = idx / 64u;
      let bn = idx % 64u;
      let gk2 = k0 + bk;
      let gp = col0 + bn;
      var bv = 0.0;
      if (gk2 < u.K && gp < u.N) {
        let ci = gk2 / khw;
        let r = gk2 % khw;
        let ih = i32((gp / u.OW) * u.sh + (r / u.KW) * u.dh) - i32(u.ph);
        let iw = i32((gp % u.OW) * u.sw + (r % u.KW) * u.dw) - i32(u.pw);
        if (ih >= 0 && ih < i32(u.H) && iw >= 0 && iw < i32(u.W)) {
          bv = f32(X[x_off + (ci * u.H + u32(ih)) * u.W + u32(iw)]);
        }
      }
      Bs[bk][bn] = bv;
    }
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
  let y_off = (n * u.groups + g) * u.M * u.N;
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
