import json,sys,re,math,bisect
def q(xs,f):
    xs=sorted(xs)
    if not xs: return float('nan')
    return xs[max(0,min(len(xs)-1,math.ceil(f*len(xs))-1))]
def qs(xs): return " ".join(f"{q(xs,f):6.1f}" for f in (.5,.9,.99,.999))+f" max {max(xs):6.1f}"
for name in sys.argv[1:]:
    d='/tmp/qload'
    urls=re.findall(r'http://127\.0\.0\.1:\d+', open(f'{d}/{name}.mock.out').read())
    idx={u:i for i,u in enumerate(urls)}
    mk=[json.loads(l) for l in open(f'{d}/{name}.reqlog') if '"ev":"req"' in l]
    lg=[json.loads(l) for l in open(f'{d}/{name}.lg.jsonl')]
    byw={}
    for r in mk: byw.setdefault(r['w'],[]).append(r)
    for w in byw: byw[w].sort(key=lambda r:r['arr_us'])
    lgw={}
    for r in lg: lgw.setdefault(idx.get(r['w'],-1),[]).append(r)
    for w in lgw: lgw[w].sort(key=lambda r:r['start_us'])
    rows=[]
    for w,ms in byw.items():
        ls=lgw.get(w,[])
        if len(ls)!=len(ms): print(name,'worker',w,'count mismatch',len(ls),len(ms))
        for a,b in zip(ls,ms): rows.append((a,b))
    rows.sort(key=lambda ab:ab[0]['start_us'])
    end=rows[-1][0]['start_us']; 
    # measured = last 10 s of loadgen starts (approx warmup excluded)
    meas=[ab for ab in rows if ab[0]['start_us']>=end-10e6]
    inb=[(b['arr_us']-a['start_us'])/1e3 for a,b in meas]
    eng=[b['ttft_ms'] for a,b in meas]
    late=[(b['pub_us']-b['arr_us'])/1e3-b['ttft_ms'] for a,b in meas]
    wr=[(b['wr_us']-b['pub_us'])/1e3 for a,b in meas]
    sent=[(b['sent_us']-b['wr_us'])/1e3 for a,b in meas]
    out=[(a['start_us']+a['ttft_ms']*1e3-b['sent_us'])/1e3 for a,b in meas]
    cl=[a['ttft_ms'] for a,b in meas]
    gap=[c-e for c,e in zip(cl,eng)]
    print(f"== {name} n={len(meas)}   quantiles p50 p90 p99 p99.9 max (ms)")
    for lab,xs in [('client ttft',cl),('engine ttft',eng),('client-engine',gap),('inbound lg->mock submit',inb),('driver late (pub-end)',late),('pub->AsyncWrite',wr),('AsyncWrite->written',sent),('written->client',out)]:
        print(f"  {lab:26s} {qs(xs)}")
    # top 1% client ttft: decompose
    top=sorted(meas,key=lambda ab:-ab[0]['ttft_ms'])[:max(1,len(meas)//100)]
    print("  top1%% client: mean inb %.1f eng %.1f late %.1f wr %.1f sent %.1f out %.1f"%tuple(sum(v)/len(top) for v in zip(*[((b['arr_us']-a['start_us'])/1e3,b['ttft_ms'],(b['pub_us']-b['arr_us'])/1e3-b['ttft_ms'],(b['wr_us']-b['pub_us'])/1e3,(b['sent_us']-b['wr_us'])/1e3,(a['start_us']+a['ttft_ms']*1e3-b['sent_us'])/1e3) for a,b in top])))
