import json, sys, collections
SCALE=2.0
def q(xs,p):
    xs=sorted(xs); return xs[max(0,int(p*len(xs))-1)] if xs else 0
for path in sys.argv[1:]:
    reqs=[json.loads(l) for l in open(path)]
    reqs=[r for r in reqs if r.get('ev')=='req']
    for r in reqs: r['t1']=r['arr_us']+r['ttft_ms']*1000/SCALE
    reqs.sort(key=lambda r:r['arr_us'])
    end=reqs[-1]['arr_us']; t0=end-10e6
    win=[r for r in reqs if r['arr_us']>=t0]
    p99=q([r['ttft_ms'] for r in win],.99)
    # a run: a miss (cached==0) arriving at a worker that already has >=1 awaiting miss sent within 30 ms (wall)
    byw=collections.defaultdict(list)
    for r in reqs: byw[r['w']].append(r)
    inrun=set()
    for w,rs in byw.items():
        for i,r in enumerate(rs):
            if r['cached']>0: continue
            grp=[x for x in rs[max(0,i-8):i] if r['arr_us']-x['arr_us']<30e3 and x['t1']>r['arr_us'] and x['cached']==0]
            if grp:
                inrun.add(id(r)); [inrun.add(id(x)) for x in grp]
    # exclude the bursts at 6.4-6.7 and 9.8-10.0 s
    def burst(r):
        t=(r['arr_us']-t0)/1e6
        return 6.4<=t<=6.7 or t>=9.8
    runs=[r for r in win if id(r) in inrun and not burst(r)]
    top=[r for r in win if r['ttft_ms']>=p99]
    print('%-42s p99 %5.0f  turns in runs (outside bursts) %3d, their ttft mean %4.0f max %4.0f; top1%% %d of which in runs %d, in bursts %d'%(
        path.split('/')[-2][-5:]+'/'+path.split('/')[-1][:-11], p99, len(runs), sum(r['ttft_ms'] for r in runs)/max(1,len(runs)), max([r['ttft_ms'] for r in runs] or [0]),
        len(top), sum(1 for r in top if id(r) in inrun and not burst(r)), sum(1 for r in top if burst(r))))
