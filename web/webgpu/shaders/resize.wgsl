// Resize along one axis (a separable pass per resized axis): output row j of the axis is
// sum_t Wt[j, t] * X[o, I[j, t], i] over TAPS taps (1 for nearest, 2 for linear, 4 for cubic,
// more with antialias); I[j, 0] < 0 marks a row outside the crop (tf_crop_and_resize).
// The tap tables come from the host (onnxedge.kernels.resize), so every coordinate mode and
// rounding rule matches the CPU kernel exactly. X, Y viewed as (outer, axis, inner).
{{ENABLE}}
struct U { n: u32, in_len: u32, out_len: u32, inner: u32, taps: u32, extrap: f32, p0: u32, p1: u32 }
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read> I: array<i32>;
@group(0) @binding(2) var<storage, read> Wt: array<f32>;
@group(0) @binding(3) var<storage, read_write> Y: array<{{T}}>;
@group(0) @binding(4) var<uniform> u: U;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= u.n) { return; }
  let t = i % u.inner;
  let j = (i / u.inner) % u.out_len;
  let o = i / (u.inner * u.out_len);
  let row = j * u.taps;
  if (I[row] < 0) {
    Y[i] = {{T}}(u.extrap);
    return;
  }
  let base = o * u.in_len * u.inner + t;
  {{BODY}}
}
