// Pad (constant / reflect / edge): output coordinate c reads input coordinate c - begin,
// mapped back into range by MODE.
{{ENABLE}}
//#include "common/coords.wgsl"
struct U { n: u32, rank: u32, value: f32, p0: u32,
           shape: array<vec4<u32>, 2>, ishape: array<vec4<i32>, 2>,
           begin: array<vec4<i32>, 2>, istride: array<vec4<u32>, 2> }
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> Y: array<{{T}}>;
@group(0) @binding(2) var<uniform> u: U;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= u.n) { return; }
  let cs = coords_of(i, u.rank, u.shape);
  var src = 0u;
  var inside = true;
  for (var k = i32(u.rank) - 1; k >= 0; k = k - 1) {
    let c = i32(cs[k / 4][k % 4]);
    let n = u.ishape[k / 4][k % 4];
    var x = c - u.begin[k / 4][k % 4];
    if (x < 0 || x >= n) {
      {{MODE}}
    }
    if (inside) { src = src + u32(x) * u.istride[k / 4][k % 4]; }
  }
  if (inside) { Y[i] = X[src]; } else { Y[i] = {{T}}(u.value); }
}
