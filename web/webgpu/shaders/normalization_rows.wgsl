// Row-wise normalizations, one row per invocation: element j of row r (= outer o, inner i) is
// X[o * D * inner + j * inner + i]. MODE picks LayerNorm/InstanceNorm, Softmax or LogSoftmax.
{{ENABLE}}
struct U { rows: u32, D: u32, inner: u32, C: u32, eps: f32, ssize: u32, bsize: u32, p0: u32 }
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
{{EXTRA_DECL}}
@group(0) @binding({{OUT_BINDING}}) var<storage, read_write> Y: array<{{T}}>;
@group(0) @binding({{U_BINDING}}) var<uniform> u: U;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let r = gid.x + gid.y * nwg.x * 64u;
  if (r >= u.rows) { return; }
  let o = r / u.inner;
  let ii = r % u.inner;
  let base = o * u.D * u.inner + ii;
  {{BODY}}
}
