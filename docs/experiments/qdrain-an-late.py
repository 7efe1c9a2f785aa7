import json, sys, math
def q(xs,p):
    xs=sorted(xs); return xs[max(0,min(len(xs)-1,math.ceil(p*len(xs))-1))]
for s in ('1main','1new'):
  for k in (1,2,3):
    out=[]
    for pol in ('round_robin','cache_aware','least_load','power_of_two'):
        rs=[json.loads(l) for l in open(f'/tmp/qdrain-logs-{s}/multi-turn-load{k}-{pol}.mock.jsonl')]
        rs=[r for r in rs if r.get('ev')=='req']; rs.sort(key=lambda r:r['arr_us'])
        t0=rs[-1]['arr_us']-10e6
        late=[r['ttft_ms'] for r in rs if r['arr_us']>=t0+5e6]
        allw=[r['ttft_ms'] for r in rs if r['arr_us']>=t0]
        out.append((pol,q(allw,.99),q(late,.99),len(late)))
    rr=out[0]
    print(s,'r%d'%k,' '.join('%s all %.0f (%.2f) last5s %.0f (%.2f) n%d'%(p[:5],a,a/rr[1],l,l/rr[2],n) for p,a,l,n in out))
