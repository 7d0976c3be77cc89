// Row-wise normalizations for long rows, one workgroup of 256 per row: each thread strides over
// the row, partial results meet in a workgroup-memory tree (`tree_sum` / `tree_max`). Element j
// of row r (= outer o, inner i) is X[o * D * inner + j * inner + i]. BODY: LayerNorm /
// InstanceNorm, Softmax or LogSoftmax (the same bodies as normalization_rows.wgsl, loops strided by WG).
{{ENABLE}}
struct U { rows: u32, D: u32, inner: u32, C: u32, eps: f32, ssize: u32, bsize: u32, p0: u32 }
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
{{EXTRA_DECL}}
@group(0) @binding({{OUT_BINDING}}) var<storage, read_write> Y: array<{{T}}>;
@group(0) @binding({{U_BINDING}}) var<uniform> u: U;

const WG = 256u;
var<workgroup> part: array<f32, 256>;

// Every thread's v combined; all threads get the result (barriers in uniform control flow).
fn tree_sum(v: f32, lid: u32) -> f32 {
  part[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s >> 1u) {
    if (lid < s) { part[lid] = part[lid] + part[lid + s]; }
    workgroupBarrier();
  }
  let r = part[0];
  workgroupBarrier();   // part is reused by the next tree
  return r;
}

fn tree_max(v: f32, lid: u32) -> f32 {
  part[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s >> 1u) {
    if (lid < s) { part[lid] = max(part[lid], part[lid + s]); }
    workgroupBarrier();
  }
  let r = part[0];
  workgroupBarrier();
  return r;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
  let r = wg.x + wg.y * nwg.x;
  if (r >= u.rows) { return; }
  let lid = lid3.x;
  let o = r / u.inner;
  let ii = r % u.inner;
  let base = o * u.D * u.inner + ii;
  {{BODY}}
}
