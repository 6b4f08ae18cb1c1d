#!/usr/bin/env bash
# The GPU checks and benchmarks, run once on a lent CUDA machine (benchmarks/RESULTS.md quotes what it printed):
#   bash benchmarks/run_gpu.sh OUT_DIR        (SMOKE=1: the same steps on tiny models, for a dry run on a CPU;
#                                              ONLY="precision profile": those steps alone)
# Each step has its own time limit, so one slow step leaves the others their time; results go to OUT_DIR.
set -uo pipefail
out=${1:?usage: run_gpu.sh OUT_DIR}
mkdir -p "$out"
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
py=${PYTHON:-python3}
if [ "${SMOKE:-0}" = 1 ]; then
    dev=cpu; size=(--size tiny); n=(--prompts 16 --slice 8); job=(--job-prompts 16); rsize=(--size tiny --prompts 8)
    gen=(--size tiny --device cpu --prompts 4 --max-new-tokens 8 --batch-sizes 2,4 --repeats 1)
    prec=(--size tiny --corpus-prompts 16 --prompts 8 --dtypes fp32,bf16)
    prof=(--size tiny --dtype fp32 --corpus-prompts 16 --prompts 8); att=(--size tiny --prompts 16)
else
    dev=cuda; size=(); n=(); job=(--job-prompts 5183); rsize=(); prec=(); prof=(); att=()
    gen=(--prompts 64 --max-new-tokens 128 --batch-sizes 16,64 --repeats 1)
    nvidia-smi -L
fi
step() {  # step SECONDS NAME COMMAND...: one step, its limit, its exit status
    local limit=$1 name=$2; shift 2
    if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return; fi
    echo "=== $name ($(date -u +%H:%M:%S), limit ${limit}s): $*"
    timeout "$limit" "$@"; echo "=== $name: exit $?"
}
$py -c "import torch, transformers, datasets, pydantic; print('torch', torch.__version__, 'transformers',
transformers.__version__, 'datasets', datasets.__version__, 'cuda', torch.cuda.is_available())"
# 1. the PairRM engine at four token budgets, fp16 (llm-blender's GPU choice), random deberta-v3-large-shaped
#    weights (built once into the cache); then, apart, a job of part2_mini_1's 5,183 prompts through
#    score_candidates at the GPU's default budget (a step each, so that a slow job leaves the first its figures)
step 120 pairrm $py benchmarks/bench_scoring.py --device $dev --skip bs1,bs8 --batch-tokens 16384,4096,8192,32768 \
    "${size[@]}" "${n[@]}" --job-prompts 0 --output-dir "$out"
step 150 pairrm-job $py benchmarks/bench_scoring.py --device $dev --skip bs1,bs8 --batch-tokens 16384 \
    "${size[@]}" "${n[@]}" "${job[@]}" --output-dir "$out"
# 1b. a fused attention (scaled_dot_product_attention, the position scores as its bias) against the engine's (fp16)
step 90 attention $py benchmarks/bench_attention.py --device $dev "${att[@]}" --output-dir "$out"
# 2. fp32, fp16 and bf16, each pass alone and batched: the scores and the chosen/rejected choices (step 1's shape,
#    initializer_range 0.1: a model that does not magnify rounding, so that batched fp32 against alone tells a fault)
step 120 precision $py benchmarks/bench_precision.py --device $dev "${prec[@]}" --initializer-range 0.1 \
    --output-dir "$out"
# 3. where the engine's time goes (torch.profiler; fp16, step 1's model)
step 60 profile $py benchmarks/profile_scoring.py --device $dev "${prof[@]}"
# 4. a sequence-classifier reward model (random TinyLlama-1.1B shape, bf16) against padded batches of 8
step 90 reward $py benchmarks/bench_scoring.py --kind sequence_classifier --device $dev "${rsize[@]}" --output-dir "$out"
# 5. generation with the Transformers backend (random TinyLlama-1.1B shape, bf16): counter noise vs multinomial
step 150 generation $py benchmarks/bench_generation.py "${gen[@]}" --output-dir "$out"
