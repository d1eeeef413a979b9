#!/bin/bash
cd "$(git rev-parse --show-toplevel)"
( while :; do :; done ) & B1=$!
( while :; do :; done ) & B2=$!
trap "kill $B1 $B2 2>/dev/null" EXIT
echo "busy loops $B1 $B2 from $(date +%T)"
timeout 1500 python -m tools.attach_wall --pair qwen2.5-coder-1.5b --limit 6 --repeat 3 --home warm --margins --out docs/results/busy-s12
echo "done $(date +%T)"
