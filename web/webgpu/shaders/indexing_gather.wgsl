// Gather along an axis: Y[o, j, t] = X[o, I[j] (negative wraps), t].
{{ENABLE}}
struct U { n: u32, nidx: u32, dim: u32, inner: u32 }
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read> I: array<i32>;
@group(0) @binding(2) var<storage, read_write> Y: array<{{T}}>;
@group(0) @binding(3) var<uniform> u: U;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= u.n) { return; }
  let t = i % u.inner;
  let j = (i / u.inner) % u.nidx;
  let o = i / (u.inner * u.nidx);
  var idx = I[j];
  if (idx < 0) { idx = idx + i32(u.dim); }
  let k = u32(clamp(idx, 0, i32(u.dim) - 1));
  Y[i] = X[(o * u.dim + k) * u.inner + t];
}
