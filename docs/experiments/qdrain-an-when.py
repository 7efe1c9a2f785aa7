import json, sys, collections
exec(open('/work/notes/b10/qdrain-an-runs.py').read().split('for path in sys.argv[1:]:')[0])
SCALE=2.0
for path in sys.argv[1:]:
    reqs=[json.loads(l) for l in open(path)]
    reqs=[r for r in reqs if r.get('ev')=='req']
    for r in reqs: r['t1']=r['arr_us']+r['ttft_ms']*1000/SCALE
    reqs.sort(key=lambda r:r['arr_us'])
    end=reqs[-1]['arr_us']; t0=end-10e6
    win=[r for r in reqs if r['arr_us']>=t0]
    p99=q([r['ttft_ms'] for r in win],.99)
    def burst(r):
        t=(r['arr_us']-t0)/1e6
        return 6.4<=t<=6.7 or t>=9.8
    # turns with ttft > 1.1 * p99 of round robin-ish (250) outside bursts
    slow=[r for r in win if not burst(r) and r['ttft_ms']>=250]
    print(path.split('/')[-2][-5:], path.split('/')[-1][:-11], 'p99 %.0f'%p99, 'turns >=250 ms outside bursts:', len(slow), 'at', sorted(set(round((r['arr_us']-t0)/1e6,1) for r in slow)))
