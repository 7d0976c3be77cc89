// MaxPool / AveragePool over 2-D windows (1-D with H = 1), one output element per invocation.
// Global pools are windows covering the whole image.
{{ENABLE}}
struct U { total: u32, H: u32, W: u32, OH: u32,
           OW: u32, KH: u32, KW: u32, sh: u32,
           sw: u32, ph: i32, pw: i32, dh: u32,
           dw: u32, include_pad: u32, eh: i32, ew: i32 }
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> Y: array<{{T}}>;
@group(0) @binding(2) var<uniform> u: U;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= u.total) { return; }
  let ow = i % u.OW;
  let oh = (i / u.OW) % u.OH;
  let nc = i / (u.OW * u.OH);
  let base = nc * u.H * u.W;
  let h0 = i32(oh * u.sh) - u.ph;
  let w0 = i32(ow * u.sw) - u.pw;
  var acc = {{INIT}};
  var count = 0u;
  for (var kh = 0u; kh < u.KH; kh = kh + 1u) {
    let ih = h0 + i32(kh * u.dh);
    for (var kw = 0u; kw < u.KW; kw = kw + 1u) {
      let iw = w0 + i32(kw * u.dw);
      if (ih >= 0 && ih < i32(u.H) && iw >= 0 && iw < i32(u.W)) {
        let v = f32(X[base + u32(ih) * u.W + u32(iw)]);
        {{ACCUMULATE}}
        count = count + 1u;
      } else if (u.include_pad == 1u && ih < i32(u.H) + u.eh && iw < i32(u.W) + u.ew) {
        count = count + 1u;
      }
    }
  }
  {{FINISH}}
  Y[i] = {{T}}(acc);
}
