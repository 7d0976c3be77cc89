// Where(cond, x, y) with numpy broadcasting of all three inputs.
{{ENABLE}}
struct U { n: u32, rank: u32, p0: u32, p1: u32, shape: array<vec4<u32>, 2>,
           sc: array<vec4<u32>, 2>, sx: array<vec4<u32>, 2>, sy: array<vec4<u32>, 2> }
@group(0) @binding(0) var<storage, read> cs: array<u32>;
@group(0) @binding(1) var<storage, read> xs: array<{{T}}>;
@group(0) @binding(2) var<storage, read> ys: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(4) var<uniform> u: U;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= u.n) { return; }
  var rem = i;
  var ic = 0u;
  var ix = 0u;
  var iy = 0u;
  for (var k = i32(u.rank) - 1; k >= 0; k = k - 1) {
    let d = u.shape[k / 4][k % 4];
    let c = rem % d;
    rem = rem / d;
    ic = ic + c * u.sc[k / 4][k % 4];
    ix = ix + c * u.sx[k / 4][k % 4];
    iy = iy + c * u.sy[k / 4][k % 4];
  }
  out[i] = select(ys[iy], xs[ix], cs[ic] != 0u);
}
