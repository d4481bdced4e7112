#!/usr/bin/env bash
# The GPU measurements in one short run, each step under its own time limit (a step cut off leaves the
# rows it finished), logs and results under $OUT (one log, one tarball of results).
#
#   scripts/gpu_run.sh                 on a machine with a CUDA device (at most 9 min 40 s; run it with a
#                                      600 s limit)
#   scripts/gpu_run.sh --rehearse      the same steps on the CPU at tiny sizes (a few minutes)
#
# Needs: torch with CUDA; the spoken words prepared here first
#   python scripts/gpu_run.py prepare --speech-dir DIR --out .gpu/speech.npz
# an S4 checkout (models/s4/s4d.py and src/models/nn) at .gpu/s4 for the S4D peer, and the wheels of the
# packages the machine lacks in .whl/ (soundfile, cffi, pycparser, s5-pytorch, mambapy). git ignores .gpu/ and
# .whl/: copy both to the GPU machine beside the working tree.
set -u
OUT=${OUT:-/tmp/gpu_run_out}
RESULTS=$OUT/results
mkdir -p "$RESULTS"
LOG=$OUT/run.log
exec > >(tee -a "$LOG") 2>&1
export PYTHONUNBUFFERED=1

DEVICE=cuda
REHEARSE=0
CUDA_TESTS="tests/nn/test_cuda.py tests/estimators/test_estimators.py tests/estimators/test_gpu_trained_model.py tests/training/test_host_reads.py"
[ "${1:-}" = "--rehearse" ] && { DEVICE=cpu; REHEARSE=1; }

if [ $REHEARSE = 0 ] && ls .whl/*.whl >/dev/null 2>&1; then  # built for the GPU machine's Python 3.12
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/gpu_run_site \
        .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/gpu_run_site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

stage() {  # stage NAME SECONDS COMMAND...
    local name=$1 limit=$2 start=$SECONDS
    shift 2
    echo "=== $name (limit ${limit} s) at $(date +%T)"
    timeout -k 5 "$limit" "$@"
    echo "=== $name: exit $? after $((SECONDS - start)) s"
}

python3 - <<'EOF'
import platform, torch
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda)
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("gpu", p.name, f"{p.total_memory / 2**30:.0f} GiB", p.multi_processor_count, "SMs")
EOF
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null

if [ $REHEARSE = 1 ]; then
    LAYER="--lengths 256,1024 --widths 16 --repeats 2 --in-process"
    PEERS="--widths 16 --states 16 --lengths 256 --heads 4 --repeats 2"
    SPEECH="--sizes 100 --seeds 0"
    SHORT="--n 200 --steps 20"
    TESTS="tests/estimators/test_streaming.py"
    PRECISIONS="--precisions 32 bf16-mixed --compile false"
else
    LAYER="--lengths 1024,4096,16384,65536 --widths 64,256,512 --repeats 3 --max-attention-gb 24"
    PEERS="--widths 64,256,512 --states 64 --lengths 1024,4096,16384,65536 --heads 8 --repeats 3 --max-seconds 5 --max-gb 40 --no-lstm"
    SPEECH="--sizes 1000 3000 --seeds 0"
    SHORT="--n 3000 --steps 300"
    TESTS="tests/estimators tests/training"
    PRECISIONS="--compile false"
fi

# 1. the tests a GPU changes (device="auto" trains on it), and a GPU-trained model for the CPU test. The
#    modules that need sktime (absent there) fail to collect and are left out.
stage "save-model" 25 python3 scripts/gpu_run.py save-model --out "$RESULTS/saved" \
    --devices $([ $REHEARSE = 1 ] && echo cpu || echo auto cuda)
stage "tests marked cuda" 40 python3 -m pytest -p no:cacheprovider -q -rfEs -m cuda $CUDA_TESTS
XDIST=$(python3 -c "import xdist" 2>/dev/null && echo "-n 12")
stage "tests (the GPU as the default device)" 50 python3 -m pytest -p no:cacheprovider -v -rfE $XDIST \
    --timeout 60 -m "not slow and not cuda" --continue-on-collection-errors $TESTS --junitxml="$RESULTS/tests.xml"
# 2. the layer against LSTM (cuDNN), GRU and a Transformer layer, and against the peers' own code (their
#    LSTM row left out: the layer step has it at the same shapes). bf16 autocast of the peers was measured
#    on 2026-11-28 (docs/results/gpu.md): float32 only here.
for ac in off bf16; do
    stage "layer autocast=$ac" 30 python3 -m ssmts.bench layer --device $DEVICE --autocast $ac $LAYER \
        --models ssm,ssm_block,lstm,gru,transformer --csv "$RESULTS/layer_$ac.csv"
done
stage "peers" 45 python3 -m ssmts.bench peers --device $DEVICE $PEERS --s4d .gpu/s4 --markdown \
    --csv "$RESULTS/peers.csv"
# 3. the scale benchmark's spoken words on the GPU: n = 1,000 first (n = 3,000 took over 215 s on the
#    H200 on 2026-11-28, its steps host-bound at about 29 ms), each row written as it is done
stage "speech" 300 python3 scripts/gpu_run.py speech --data .gpu/speech.npz --device $DEVICE $SPEECH \
    --out "$RESULTS/scale_gpu.jsonl"
# 4. precision (compile=True did not finish its first compilations in 60 s there), and where a step's time goes
stage "precision" 30 python3 scripts/gpu_run.py precision --data .gpu/speech.npz --device $DEVICE $SHORT \
    $PRECISIONS --out "$RESULTS/precision.jsonl"
stage "profile" 30 python3 scripts/gpu_run.py profile --data .gpu/speech.npz --device $DEVICE \
    $([ $REHEARSE = 1 ] && echo "--n 200 --steps 10" || echo "--n 3000 --steps 40")

tar -czf "$OUT/results.tar.gz" -C "$OUT" results && rm -rf "$RESULTS"
echo "=== done at $(date +%T)"
