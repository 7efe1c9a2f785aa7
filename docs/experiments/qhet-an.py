import json,sys
def q(xs,f):
    xs=sorted(xs)
    if not xs: return float('nan')
    import math
    return xs[max(0,min(len(xs)-1,math.ceil(f*len(xs))-1))]
for name in sys.argv[1:]:
    reqs=[json.loads(l) for l in open(f'/tmp/qhet-real/{name}.reqlog') if '"ev":"req"' in l]
    reqs.sort(key=lambda r:r['arr_us'])
    end=reqs[-1]['arr_us']; meas=[r for r in reqs if r['arr_us']>=end-10e6]
    lg=json.load(open(f'/tmp/qhet-real/{name}.json'))
    tt=[r['ttft_ms'] for r in meas]
    fast=[r['ttft_ms'] for r in meas if r['w']<6]; slow=[r['ttft_ms'] for r in meas if r['w']>=6]
    print(f"{name}: engine TTFT p99 {q(tt,.99):.1f} p50 {q(tt,.5):.1f} (n {len(tt)}); fast p50 {q(fast,.5):.1f} p99 {q(fast,.99):.1f}; slow n {len(slow)} ({100*len(slow)/len(tt):.1f}%) p50 {q(slow,.5):.1f} p99 {q(slow,.99):.1f}")
