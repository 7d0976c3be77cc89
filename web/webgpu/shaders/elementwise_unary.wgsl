// Elementwise unary op family: y[i] = EXPR(x[i]); x is read as f32 (`x`) and raw (`xr`).
{{ENABLE}}
struct U { n: u32, alpha: f32, beta: f32, gamma: f32 }
@group(0) @binding(0) var<storage, read> xs: array<{{TI}}>;
@group(0) @binding(1) var<storage, read_write> ys: array<{{TO}}>;
@group(0) @binding(2) var<uniform> u: U;

// erf with max abs error 1.2e-7 (Numerical Recipes erfc, Chebyshev fit).
fn erf_(v: f32) -> f32 {
  let z = abs(v);
  let t = 1.0 / (1.0 + 0.5 * z);
  let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
          t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
          t * (-0.82215223 + t * 0.17087277)))))))));
  return select(r - 1.0, 1.0 - r, v >= 0.0);
}

fn sigmoid_(v: f32) -> f32 {
  if (v >= 0.0) { return 1.0 / (1.0 + exp(-v)); }
  let e = exp(v);
  return e / (1.0 + e);
}

fn tanh_(v: f32) -> f32 {
  if (abs(v) > 15.0) { return sign(v); }
  return tanh(v);
}

fn softplus_(v: f32) -> f32 {
  if (v < -5.0) {
    let e = exp(v);
    return e * (1.0 - 0.5 * e + e * e / 3.0);
  }
  return max(v, 0.0) + log(1.0 + exp(-abs(v)));
}

// mish(x) = x * tanh(softplus(x)) = x * n / (n + 2) with e = exp(x), n = e * (e + 2): no
// cancellation in tanh of a tiny softplus for negative x, no overflow past x = 20.
fn mish_(v: f32) -> f32 {
  if (v > 20.0) { return v; }
  let e = exp(v);
  let n = e * (e + 2.0);
  return v * n / (n + 2.0);
}

fn round_even(v: f32) -> f32 {
  let f = floor(v);
  let d = v - f;
  if (d > 0.5) { return f + 1.0; }
  if (d < 0.5) { return f; }
  return select(f + 1.0, f, (f * 0.5) == floor(f * 0.5));
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= u.n) { return; }
  let xr = xs[i];
  let x = f32(xr);
  ys[i] = {{EXPR}};
}
