import json, sys, collections
SCALE=2.0
for path in sys.argv[1:]:
    reqs=[json.loads(l) for l in open(path)]
    reqs=[r for r in reqs if r.get('ev')=='req']
    for r in reqs: r['t1']=r['arr_us']+r['ttft_ms']*1000/SCALE
    reqs.sort(key=lambda r:r['arr_us'])
    end=reqs[-1]['arr_us']; t0=end-10e6
    win=[r for r in reqs if r['arr_us']>=t0]
    ts=sorted(r['ttft_ms'] for r in win); p99=ts[int(.99*len(ts))-1]
    top=[r for r in win if r['ttft_ms']>=p99*0.95]
    print(path.split('/')[-1],'p99',p99,'n top',len(top))
    for r in sorted(top,key=lambda r:r['arr_us']):
        print('  t %.3f w%d ttft %d prompt %d cached %d aw %d awtok %d run %d'%((r['arr_us']-t0)/1e6,r['w'],r['ttft_ms'],r['prompt'],r['cached'],r['aw'],r['aw_tok'],r['run']))
