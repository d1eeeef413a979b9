#!/bin/bash
# old = /work/m3 (main before the trust change), new = /work/main (with it)
for rep in 1 2 3; do
for side in old new; do
  dir=/work/m3; [ $side = new ] && dir=/work/main
  cd $dir
  echo "== load $side r$rep $(date +%T)"
  /work/main/.venv/bin/python -m tools.load_test --pair qwen2.5-coder-1.5b --parallel 4 --clients 4 --drafts none,model --suite code_editing --limit 8 --max-tokens 96 --repeat 1 --out /work/runs/s12/trust/load-$side-r$rep 2>&1 | tail -4
done; done
echo "== done $(date +%T)"
