#!/bin/bash
cd "$(git rev-parse --show-toplevel)"
for suite in long_documents heldout/long_documents; do
for rep in 1 2; do
for mode in off on; do
  tag=$(echo $suite | tr '/' '-')-$mode-r$rep
  echo "== $tag $(date +%T)"
  TANDEM_REPACK=$mode python -m tools.attach_wall --pair qwen2.5-coder-1.5b --suite $suite --repeat 1 --home warm --margins --out docs/results/repack-s12/attach-ab/$tag
done; done; done
echo "== done $(date +%T)"
