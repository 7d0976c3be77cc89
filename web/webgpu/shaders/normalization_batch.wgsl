// BatchNormalization (inference): y = (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c].
{{ENABLE}}
struct U { total: u32, C: u32, inner: u32, eps: f32 }
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read> S: array<{{T}}>;
@group(0) @binding(2) var<storage, read> Bb: array<{{T}}>;
@group(0) @binding(3) var<storage, read> Mn: array<{{T}}>;
@group(0) @binding(4) var<storage, read> Vr: array<{{T}}>;
@group(0) @binding(5) var<storage, read_write> Y: array<{{T}}>;
@group(0) @binding(6) var<uniform> u: U;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= u.total) { return; }
  let c = (i / u.inner) % u.C;
  let inv = f32(S[c]) / sqrt(f32(Vr[c]) + u.eps);
  Y[i] = {{T}}((f32(X[i]) - f32(Mn[c])) * inv + f32(Bb[c]));
}
