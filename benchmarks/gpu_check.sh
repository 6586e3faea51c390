#!/usr/bin/env bash
# The GPU checks of the open issues in one call, sized for a short lease of one GPU:
# benchmarks/speed.py (steps per second and the fraction of the device's FLOP and bandwidth
# floor), the diagonal step on a flat and a per-layer belief (belief_layout.py), a model
# fitted and pickled there (gpu_pickle.py), mnist_stream.py on the CNN, the
# test suite, then mnist_stream.py on the MLP (accuracy, NLL and ms per step at the
# committed hyperparameters, no tuning).
#
#     bash benchmarks/gpu_check.sh OUT_DIR [BUDGET_SECONDS]
#
# Each step runs under `timeout` within the budget (default 540 s), in the order speed,
# layout, pickle, mnist_cnn, pytest, mnist_mlp (speed.py first, so that its timings see an idle
# machine and a short lease still brings them back). STEPS picks the steps (default all
# six; e.g. STEPS="mnist_mlp" for a second call). A step stopped at its cap gets SIGINT
# first: pytest then prints its summary of the tests it ran. OUT_DIR receives one log per
# step, env.txt (devices, versions, nvidia-smi, each step's exit status and seconds),
# fitted_gpu.pkl (check it where no GPU is: python gpu_pickle.py load fitted_gpu.pkl) and
# results.tar.gz (the benchmarks/results/*_gpu.* files that this call wrote): at most eight
# files, the most a device call brings back. The benchmarks read the data from
# SKBONG_DATA (default: .data in the repository if it is there, else skbong's default).
#
# QUICK=1 runs the same steps at the scripts' --quick sizes and on two test files, to check
# this script on a CPU in a few minutes. Nothing here needs network access; the packages
# that the test extra adds and a GPU image may lack (distributed, river) only skip their
# tests.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:?usage: gpu_check.sh OUT_DIR [BUDGET_SECONDS]}
budget=${2:-540}
mkdir -p "$out" && out=$(cd "$out" && pwd)
deadline=$((SECONDS + budget))
started=$(mktemp)  # reports older than this are not this call's
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if [ -z "${SKBONG_DATA:-}" ] && [ -d .data ]; then export SKBONG_DATA="$PWD/.data"; fi
quick=${QUICK:-0}
steps=" ${STEPS:-speed layout pickle mnist_cnn pytest mnist_mlp} "
suffix=$([ "$quick" = 1 ] && echo _quick || echo _gpu)

# run NAME CAP_SECONDS COMMAND...: the command under `timeout`, capped by what is left of the
# budget, if STEPS names it; its output goes to OUT_DIR/NAME.log, and its exit status and
# seconds to env.txt.
run() {
    local name=$1 cap=$2 left=$((deadline - SECONDS))
    shift 2
    [[ "$steps" == *" $name "* ]] || return 0
    [ "$left" -lt "$cap" ] && cap=$left
    if [ "$cap" -le 10 ]; then
        echo "$name: skipped, budget spent" | tee -a "$out/env.txt"
        return
    fi
    local start=$SECONDS
    timeout --signal=INT --kill-after=20 "$cap" "$@" >"$out/$name.log" 2>&1
    local status=$?
    echo "$name: exit $status after $((SECONDS - start)) s (cap $cap s)" | tee -a "$out/env.txt"
}

{
    date -u +"%Y-%m-%dT%H:%M:%SZ"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || echo "no nvidia-smi"
    python3 -c "import jax, flax, sklearn, numpy; print('jax', jax.__version__, 'flax', flax.__version__, 'sklearn', sklearn.__version__, 'numpy', numpy.__version__); print('devices', jax.devices())"
    echo "SKBONG_DATA=${SKBONG_DATA:-unset} QUICK=$quick budget=${budget}s"
} >"$out/env.txt" 2>&1
cat "$out/env.txt"

bench_flags=$([ "$quick" = 1 ] && echo --quick)
# The whole speed.py needs about 5 minutes on an H200 (each cell compiles for 2-12 s), so by
# default three sizes: P = 10k (FC's largest), 32k and 400k, about 100 s there.
speed_args=${SPEED_ARGS---widths 13,40,503 --skip-mnist}
[ "$quick" = 1 ] && speed_args=""
(cd benchmarks && run speed 170 python3 speed.py $bench_flags $speed_args --name "speed$suffix")
# The diagonal step on the flat belief against the per-layer one (belief_layout.py): the
# filter carries it per layer on a CPU only, from one before/after comparison of speed.py
# on the H200; this times both on the same device in one run.
layout_args="--widths 40,503 --rounds 7"
[ "$quick" = 1 ] && layout_args="--widths 4 --rounds 2 --steps 8"
(cd benchmarks && run layout 100 python3 belief_layout.py $layout_args --name "belief_layout$suffix")
# A model fitted here, for loading on a CPU-only machine: python gpu_pickle.py load OUT_DIR/fitted_gpu.pkl
(cd benchmarks && run pickle 90 python3 gpu_pickle.py save "$out/fitted$suffix.pkl")

# The suite: one worker per core, as in CI; -p no:cacheprovider keeps the tree clean. It runs
# after the CNN and takes what is left of the budget: the MLP's GPU report is older but exists.
# The whole suite needs about 17 minutes on an H200 with 16 workers (742 tests ran in 288 s),
# more than a lease: TESTS names the files or node ids to run (default: all), so that
# sessions can cover it in parts. Most of a GPU test's time is compiling, much of that XLA's
# GEMM autotuner; the suite turns it off (--xla_gpu_autotune_level=0, if this XLA knows the
# flag; not yet timed against the default), which changes which GEMM kernels run, not what
# they compute. SUITE_AUTOTUNE=1 keeps it.
if [ "$quick" = 1 ]; then
    tests=(tests/test_devices.py tests/core/test_families.py)
else
    read -r -d "" -a tests <<<"${TESTS:-tests}"  # one per word or per line
fi
suite_xla_flags=${XLA_FLAGS:-}
if [ "${SUITE_AUTOTUNE:-0}" != 1 ] && XLA_FLAGS="--xla_gpu_autotune_level=0 $suite_xla_flags" \
    python3 -c "import jax.numpy as jnp; (jnp.ones((64, 64)) @ jnp.ones((64, 64))).block_until_ready()" >/dev/null 2>&1; then
    suite_xla_flags="--xla_gpu_autotune_level=0 $suite_xla_flags"
fi
echo "suite XLA_FLAGS: ${suite_xla_flags:-none}" >>"$out/env.txt"
(cd benchmarks && run mnist_cnn 120 python3 mnist_stream.py $bench_flags --models cnn --seeds 1 \
    --hyperparameters results/mnist_stream_cnn.json --name "mnist_stream_cnn$suffix")
# The workers share the persistent compilation cache that tests/conftest.py makes for each
# run: a program that several tests compile (check_estimator's many fits of the same
# configuration) compiles once. SUITE_CACHE=0 turns it off (an empty JAX_COMPILATION_CACHE_DIR,
# in a subshell so that the later steps keep the caller's setting). junit.xml lists every test
# that ran, also when the cap (SUITE_CAP, default 420 s) stops the step, so that a next call
# can run the rest.
(
    [ "${SUITE_CACHE:-1}" = 1 ] || export JAX_COMPILATION_CACHE_DIR=
    XLA_FLAGS=$suite_xla_flags run pytest "${SUITE_CAP:-420}" \
        python3 -m pytest -q -p no:cacheprovider -rf --durations=15 --junitxml="$out/junit.xml" "${tests[@]}"
)
(cd benchmarks && run mnist_mlp 150 python3 mnist_stream.py $bench_flags --models mlp \
    --hyperparameters results/mnist_stream_mlp.json --name "mnist_stream_mlp$suffix")

find benchmarks/results -name "*$suffix.*" -newer "$started" -print0 | tar -czf "$out/results.tar.gz" --null -T -
tail -n 3 "$out/pytest.log" 2>/dev/null
ls -l "$out"
