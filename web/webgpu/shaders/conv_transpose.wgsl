// ConvTranspose2D (1-D with H = 1), one output element per invocation, gathering the inputs
// that scatter into it: oh = ih * sh - ph + kh * dh.
{{ENABLE}}
struct U { total: u32, C: u32, H: u32, W: u32,
           OC: u32, OH: u32, OW: u32, groups: u32,
           KH: u32, KW: u32, sh: u32, sw: u32,
           ph: u32, pw: u32, dh: u32, dw: u32 }
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read> Wt: array<{{T}}>;
{{BIAS_DECL}}
@group(0) @binding({{OUT_BINDING}}) var<storage, read_write> Y: array<{{T}}>;
@group(0) @binding({{U_BINDING}}) var<uniform> u: U;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= u.total) { return; }
  let ow = i % u.OW;
  let oh = (i / u.OW) % u.OH;
  let co = (i / (u.OW * u.OH)) % u.OC;
  let n = i / (u.OW * u.OH * u.OC);
  let cin_g = u.C / u.groups;
  let cout_g = u.OC / u.groups;
  let g = co / cout_g;
  let col = co % cout_g;
  var v = 0.0;
  for (var kh = 0u; kh < u.KH; kh = kh + 1u) {
    let th = i32(oh) + i32(u.ph) - i32(kh * u.dh);
    if (th < 0 || th % i32(u.sh) != 0) { continue; }
    let ih = u32(th) / u.sh;
    if (ih >= u.H) { continue; }
    for (var kw = 0u; kw < u.KW; kw = kw + 1u) {
      let tw = i32(ow) + i32(u.pw) - i32(kw * u.dw);
      if (tw < 0 || tw % i32(u.sw) != 0) { continue; }
      let iw = u32(tw) / u.sw;
      if (iw >= u.W) { continue; }
      for (var c = 0u; c < cin_g; c = c + 1u) {
        let ci = g * cin_g + c;
        let xv = f32(X[((n * u.C + ci) * u.H + ih) * u.W + iw]);
        let wv = f32(Wt[((ci * cout_g + col) * u.KH + kh) * u.KW + kw]);
        v = v + xv * wv;
      }
    }
  }
  {{BIAS_ADD}}
  Y[i] = {{T}}(v);
}
