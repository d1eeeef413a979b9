#!/bin/bash
# Section 5 of docs/benchmarks.md, second run (the first was `tandem optimize-draft --source requantize --json`).
# Run from the repository root, under the CPU lock: flock /tmp/tandem-cpu.lock bash docs/results/draft-optimizer/run2.sh
export PYTHONPATH=$PWD TANDEM_HOME=${TANDEM_HOME:-/tmp/tandem-opt}
PY=${PY:-.venv/bin/python}
T=$($PY -c "from engine import store; print(store.find_model('qwen2.5-coder-1.5b-instruct-q4_k_m'))")
D=$($PY -c "from engine import store; print(store.find_model('qwen2.5-coder-0.5b-instruct-q4_k_m'))")
V=$TANDEM_HOME/drafts/qwen2.5-coder-0.5b-instruct-q4_k_m.q4_0.gguf
git log --oneline | head -1; date -u
# 1. the optimiser again (variant from the first run reused), for reproducibility
$PY -m engine.cli optimize-draft qwen2.5-coder-1.5b --source requantize > /tmp/opt2.txt 2>/dev/null
cat /tmp/opt2.txt
date -u
# 2. wall-clock races, one run each side: variant k=3, original k=3, variant auto
for id in 0 1 2; do
  P=$($PY -c "import json;print(json.loads(open('assets/suites/code_generation.jsonl').read().splitlines()[$id])['prompt'])")
  for cfg in "$V 3" "$D 3" "$V auto"; do
    set -- $cfg
    $PY -m engine.cli race "$P" --target $T --draft $1 --lookahead $2 --chat --max-tokens 96 --json > /tmp/race.json 2>/dev/null
    $PY - "$id" "$(basename $1)" "$2" <<'PYX'
import json, sys
d = json.load(open('/tmp/race.json'))
t, s = d['target']['stats'], d['speculative']['stats']
print(json.dumps({"prompt": int(sys.argv[1]), "draft": sys.argv[2], "k": sys.argv[3],
  "target_wall": round(t['wall_s'], 2), "spec_wall": round(s['wall_s'], 2), "wall_ratio": round(t['wall_s'] / s['wall_s'], 3),
  "target_tps": round(t['decode_tokens_per_s'], 1), "spec_tps": round(s['decode_tokens_per_s'], 1), "decode_ratio": round(d['speedup'], 3),
  "acc": round(s.get('acceptance_rate', 0), 3), "drafted": s.get('drafted'), "tokens": s.get('generated_tokens'), "identical": d['identical'],
  "ttft": [round(t['time_to_first_token_s'], 2), round(s['time_to_first_token_s'], 2)]}))
PYX
  done
done
date -u
