#!/bin/bash
# The real window vs `tandem generate`, same prompt and pair (docs/benchmarks.md, section 7).
#   tools/real_window_vs_cli.sh OUTDIR REPS CHECKOUT [CHECKOUT...]
# Each CHECKOUT's app runs on its own Xvfb display (kept open, loaded with the default pair);
# per repetition, in an order rotated each time, the prompt is typed into each window with
# xdotool (Ctrl+N, Ctrl+L, type, Ctrl+Enter) and `tandem generate` runs once. The decode
# tok/s of every run is read from the metrics log (the figure the app's stats line shows),
# with the load average, into OUTDIR/results.txt; a screenshot of each window after its run.
# DRAFT=none (or lookup) picks that drafter in each window's Draft box (clicked with xdotool)
# and passes --draft to `tandem generate`; unset, both use the pair's draft model under Auto.
# Needs Xvfb, xdotool and ImageMagick's import; run it under the CPU lock.
OUT=$1; REPS=$2; shift 2; WTS=("$@")
DRAFT=${DRAFT:-}
PY=${PYTHON:-python}
export TANDEM_HOME=${TANDEM_HOME:-$OUT/home} XDG_CONFIG_HOME=${XDG_CONFIG_HOME:-$OUT/config}
PROMPT="Write a Python function that parses a CSV line with quoted fields, with a docstring."
mkdir -p $OUT $TANDEM_HOME; LOG=$TANDEM_HOME/metrics.jsonl; touch $LOG
declare -a APIDS XPIDS WIDS DISPS
for i in "${!WTS[@]}"; do
  D=:$((95+i)); DISPS[$i]=$D
  Xvfb $D -screen 0 1600x1000x24 -nolisten tcp >/dev/null 2>&1 & XPIDS[$i]=$!
  sleep 1
  (cd ${WTS[$i]} && DISPLAY=$D PYTHONPATH=${WTS[$i]} exec $PY -m app --pair qwen2.5-coder-1.5b >$OUT/app$i.log 2>&1) & APIDS[$i]=$!
done
sleep 8
for i in "${!WTS[@]}"; do
  idle=0; prev=$(awk '{print $14+$15}' /proc/${APIDS[$i]}/stat)
  while [ $idle -lt 2 ]; do sleep 1; now=$(awk '{print $14+$15}' /proc/${APIDS[$i]}/stat); if [ $((now-prev)) -lt 10 ]; then idle=$((idle+1)); else idle=0; fi; prev=$now; done
  WIDS[$i]=$(DISPLAY=${DISPS[$i]} xdotool search --pid ${APIDS[$i]} --onlyvisible | head -1)
  echo "app $i ${WTS[$i]} pid ${APIDS[$i]} window ${WIDS[$i]}"
  if [ -n "$DRAFT" ]; then  # the Draft box sits at (628, 48) of the 1360-wide window: open it, pick by name
    case $DRAFT in none) ITEM="No draft";; lookup) ITEM="Prompt lookup";; *) echo "DRAFT=$DRAFT: none or lookup"; exit 2;; esac
    DISPLAY=${DISPS[$i]} xdotool mousemove --window ${WIDS[$i]} 628 48 click 1; sleep 0.8
    DISPLAY=${DISPS[$i]} xdotool type --delay 50 "$ITEM"; DISPLAY=${DISPS[$i]} xdotool key Return; sleep 0.8
    DISPLAY=${DISPS[$i]} import -window root $OUT/app$i-draft.png 2>/dev/null
  fi
done
line() { tail -1 $LOG | $PY -c "import json,sys; r=json.loads(sys.stdin.read()); s=r['stats']; print('$1', r['task'], round(s['decode_tokens_per_s'],2), s['generated_tokens'], s['lookahead'], 'acc', round(s['acceptance_rate'],2), 'cal', round(s['calibration_s'],2))"; }
wait_line() { local n=$1 i; for i in $(seq 1 900); do [ $(wc -l <$LOG) -gt $n ] && return 0; sleep 0.5; done; return 1; }
app_run() { # index rep
  local i=$1 D=${DISPS[$1]} W=${WIDS[$1]} n=$(wc -l <$LOG)
  export DISPLAY=$D
  xdotool windowactivate --sync $W 2>/dev/null; xdotool windowfocus --sync $W
  xdotool key ctrl+n; sleep 0.7; xdotool key ctrl+l; sleep 0.3
  xdotool type --delay 5 "$PROMPT"; sleep 0.3
  xdotool key ctrl+Return
  wait_line $n || echo "app $i: no result"; sleep 1.5
  line "APP$i rep$2 $(uptime | sed 's/.*average: //')" | tee -a $OUT/results.txt
  import -window root $OUT/app$i-rep$2.png 2>/dev/null
}
cli_run() {
  local n=$(wc -l <$LOG)
  $PY -m engine.cli generate --pair qwen2.5-coder-1.5b --chat --lookahead auto --max-tokens 512 ${DRAFT:+--draft $DRAFT} --tag cli "$PROMPT" >$OUT/cli-rep$1.txt 2>&1
  line "CLI rep$1 $(uptime | sed 's/.*average: //')" | tee -a $OUT/results.txt
}
N=$((${#WTS[@]}+1))
for r in $(seq 1 $REPS); do
  for j in $(seq 0 $((N-1))); do
    k=$(( (j + r) % N ))
    if [ $k -eq $((N-1)) ]; then (cd ${WTS[0]} && cli_run $r); else app_run $k $r; fi
  done
done
for i in "${!WTS[@]}"; do kill ${APIDS[$i]} ${XPIDS[$i]} 2>/dev/null; done
wait 2>/dev/null
