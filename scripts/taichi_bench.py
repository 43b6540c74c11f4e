"""Headless timing of Taichi's own mpm99 / mpm3d examples, for side-by-side comparisons
(scripts/compare_taichi.sh runs it next to the engine's examples).

Usage: python taichi_bench.py {mpm99|mpm3d|mpm3d128} {cpu|vulkan|cuda} [steps] [warmup]

The example source shipped in the installed taichi package is loaded verbatim and
executed with only these textual substitutions (each asserted to match exactly once):
  * ti.init(arch=ti.gpu)  ->  ti.init(arch=<argv arch>)
  * mpm3d only: the active config line (dim 3, n_grid 32, dt 4e-4) is swapped for the
    example's own commented 64^3 line (dim 3, n_grid 64, steps 25, dt 2e-4).
The GUI main() is never called (module is exec'd with __name__ != "__main__").
"""
import os, sys, time
import taichi as ti

scene = sys.argv[1]
arch_name = sys.argv[2]
steps = int(sys.argv[3]) if len(sys.argv) > 3 else (2000 if scene == "mpm99" else 100)
warmup = int(sys.argv[4]) if len(sys.argv) > 4 else 100
assert arch_name in ("cpu", "vulkan", "cuda")

# `mpm3d128`: Taichi's mpm3d with its own commented 128^3 line (dt 8e-5).
example = "mpm3d" if scene == "mpm3d128" else scene
src_path = os.path.join(os.path.dirname(ti.__file__), "examples", "simulation", example + ".py")
src = open(src_path).read()

def sub(old, new):
    global src
    assert src.count(old) == 1, (old, src.count(old))
    src = src.replace(old, new)

sub("ti.init(arch=ti.gpu)", "ti.init(arch=getattr(ti, BENCH_ARCH))")
if scene == "mpm3d":
    sub("dim, n_grid, steps, dt = 3, 32, 25, 4e-4\n", "# (orig 32^3 line disabled)\n")
    sub("# dim, n_grid, steps, dt = 3, 64, 25, 2e-4", "dim, n_grid, steps, dt = 3, 64, 25, 2e-4")
if scene == "mpm3d128":
    sub("dim, n_grid, steps, dt = 3, 32, 25, 4e-4\n", "# (orig 32^3 line disabled)\n")
    sub("# dim, n_grid, steps, dt = 3, 128, 25, 8e-5", "dim, n_grid, steps, dt = 3, 128, 25, 8e-5")

# Write the patched source to a real file so Taichi's inspect-based source lookup sees
# exactly the code being run.
gen_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"taichi_bench_{scene}.py")
with open(gen_path, "w") as f:
    f.write(src)
g = {"__name__": "ti_example_" + scene, "__file__": gen_path, "BENCH_ARCH": arch_name}
exec(compile(src, gen_path, "exec"), g)

if scene == "mpm99":
    g["initialize"]()
    print(f"params: n_particles={g['n_particles']} n_grid={g['n_grid']} dt={g['dt']}")
else:
    g["init"]()
    print(f"params: dim={g['dim']} n_grid={g['n_grid']} n_particles={g['n_particles']} dt={g['dt']} E={g['E']}")
substep = g["substep"]
print("arch:", ti.lang.impl.current_cfg().arch, "default_fp:", ti.lang.impl.current_cfg().default_fp)

for _ in range(warmup):
    substep()
ti.sync()
t0 = time.perf_counter()
for _ in range(steps):
    substep()
ti.sync()
secs = time.perf_counter() - t0
n = g["n_particles"]
x = (g["x"] if scene == "mpm99" else g["F_x"]).to_numpy()
import numpy as np
print(f"sanity: x finite={np.isfinite(x).all()} min={x.min():.4f} max={x.max():.4f} mean={x.mean(axis=0)}")
print(f"RESULT scene={scene} arch={arch_name} particles={n} substeps={steps} warmup={warmup} "
      f"ms_per_substep={secs*1e3/steps:.4f} throughput={n*steps/secs:.0f} particle-steps/s")
