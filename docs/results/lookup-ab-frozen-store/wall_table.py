import json, statistics as st, collections, sys
rs=[json.loads(l) for l in open(sys.argv[1])]
by=collections.defaultdict(dict)
for r in rs: by[(r['suite'],r['prompt_id'],r['rep'])][r['mode']]=r
agg=collections.defaultdict(list)
for (s,p,rep),v in by.items():
    if 'auto' in v and 'target' in v:
        a,t=v['auto'],v['target']
        agg[s].append((t['wall_s']/a['wall_s'], a['decode_tokens_per_s']/t['decode_tokens_per_s'], a['drafted'], a['accepted'], a.get('identical')))
for s,x in agg.items():
    w=[y[0] for y in x]; d=[y[1] for y in x]
    print(f"| {s} | {st.median(w):.2f}x ({min(w):.2f}–{max(w):.2f}) | {st.median(d):.2f}x | {sum(y[3] for y in x)}/{sum(y[2] for y in x)} | {sum(1 for y in x if y[4])}/{len(x)} |")
