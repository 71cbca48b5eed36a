"""Developer tools that measure the project from outside the package, run from the repository root.

* ``python -m tools.bench_profile``: where one eager WASH step's time goes;
* ``python -m tools.latency``: the app's click-to-first-token and tab latencies, through its API;
* ``python -m tools.preset_tour``: every preset clicked in headless Chromium;
* ``tools/gpu_run.sh OUTDIR`` (with ``tools/gpu_run.py`` and ``tools/gpu_bundle.py``): the prepared
  GPU run, dummy members at 8B shapes (docs/BENCHMARKS.md);
* ``python -m tools.gpu_profile OUTDIR [--cpu]``: where a WASH step's time goes on a GPU, beyond
  the members' forwards (cProfile, torch's profiler, parallel forwards on and off);
* ``python -m tools.suite_cpu -- COMMAND``: a command's CPU time by kind of process (the test
  suite's: pytest workers, Chromium, app processes, Ray, scripts).

``python -m wash bench`` stays in the package: it is a user's command (per-token cost on
their machine, any backend). Results go to ``docs/BENCHMARKS.md`` and ``results/``.
"""
