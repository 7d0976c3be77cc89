// Elementwise binary op family with numpy broadcasting: y = EXPR(a, b), strides as uniforms.
{{ENABLE}}
//#include "common/coords.wgsl"
struct U { n: u32, rank: u32, p0: u32, p1: u32,
           shape: array<vec4<u32>, 2>, sa: array<vec4<u32>, 2>, sb: array<vec4<u32>, 2> }
@group(0) @binding(0) var<storage, read> as_: array<{{TA}}>;
@group(0) @binding(1) var<storage, read> bs: array<{{TB}}>;
@group(0) @binding(2) var<storage, read_write> ys: array<{{TO}}>;
@group(0) @binding(3) var<uniform> u: U;

// pow with ONNX/numpy semantics for negative bases and integral exponents.
fn pow_(a: f32, b: f32) -> f32 {
  if (b == 0.0) { return 1.0; }
  if (a >= 0.0) { return pow(a, b); }
  // NaN from a var: Chromium's Tint rejects a constant expression that evaluates to NaN
  var nan_bits = 0x7fc00000u;
  if (b != floor(b)) { return bitcast<f32>(nan_bits); }
  let m = pow(-a, b);
  return select(m, -m, (b * 0.5) != floor(b * 0.5));
}

fn fmod_(a: f32, b: f32) -> f32 {
  return a - b * trunc(a / b);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= u.n) { return; }
  let c = coords_of(i, u.rank, u.shape);
  let ia = offset_of(c, u.rank, u.sa);
  let ib = offset_of(c, u.rank, u.sb);
  let ar = as_[ia];
  let br = bs[ib];
  let a = f32(ar);
  let b = f32(br);
  ys[i] = {{EXPR}};
}
