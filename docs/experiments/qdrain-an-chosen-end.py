import json, sys, collections
sys.path.insert(0,'/tmp/qca/an')
SCALE=2.0
def load(path):
    reqs=[]
    for line in open(path):
        r=json.loads(line)
        if r.get('ev')!='req': continue
        r['t1']=r['arr_us']+r['ttft_ms']*1000/SCALE
        reqs.append(r)
    reqs.sort(key=lambda r:r['arr_us'])
    return reqs
def q(xs,p):
    xs=sorted(xs); return xs[max(0,int(p*len(xs))-1)] if xs else 0
for path in sys.argv[1:]:
    reqs=load(path); end=reqs[-1]['arr_us']
    win=[r for r in reqs if r['arr_us']>=end-10e6]
    nw=8
    byw=collections.defaultdict(list)
    for r in reqs: byw[r['w']].append(r)
    def state(w,t,me):
        n=0;e=t;tok=0
        for r in byw[w]:
            if r['arr_us']>t: break
            if r['arr_us']<t<r['t1'] and r is not me: n+=1; e=max(e,r['t1']); tok+=r['prompt']-r['cached']
        return n,(e-t)/1000*SCALE,tok
    reg=[];allb=[];allb_t=[];ch=[];mn=[]
    hist=collections.Counter()
    for r in win:
        st=[state(w,r['arr_us'],r) for w in range(nw)]
        mine=st[r['w']]
        m=min(s[1] for s in st)
        reg.append(mine[1]-m)
        if min(s[0] for s in st)>0:
            allb.append(r); allb_t.append(r['ttft_ms']); ch.append(mine[1]); mn.append(m)
        hist[mine[0]]+=1
    print(path.split('/')[-1], 'n',len(win),'p99',q([r['ttft_ms'] for r in win],.99),'regret mean %.1f p90 %.1f p99 %.1f'%(sum(reg)/len(reg),q(reg,.9),q(reg,.99)),
      'allbusy n',len(allb),'ttft mean %.0f p99 %.0f'%(sum(allb_t)/len(allb_t),q(allb_t,.99)),'chosen-end mean %.1f min-end mean %.1f'%(sum(ch)/len(ch),sum(mn)/len(mn)),
      'chosen awaiting hist',sorted(hist.items()))
print('--- regret split')
for path in sys.argv[1:]:
    reqs=load(path); end=reqs[-1]['arr_us']
    win=[r for r in reqs if r['arr_us']>=end-10e6]
    byw=collections.defaultdict(list)
    for r in reqs: byw[r['w']].append(r)
    def state(w,t,me):
        n=0;e=t
        for r in byw[w]:
            if r['arr_us']>t: break
            if r['arr_us']<t<r['t1'] and r is not me: n+=1; e=max(e,r['t1'])
        return n,(e-t)/1000*SCALE
    cat=collections.defaultdict(list)
    for r in win:
        st=[state(w,r['arr_us'],r) for w in range(8)]
        m=min(s[1] for s in st); reg=st[r['w']][1]-m
        rnd=1+round((r['prompt']-810)/200)
        k=('hit' if r['cached']>0.3*r['prompt'] else 'miss')+('-r1' if rnd==1 else '-rN')
        cat[k].append((reg,r['ttft_ms']))
    print(path.split('/')[-1], {k:(len(v), round(sum(a for a,_ in v)/len(v),1), sum(1 for a,_ in v if a>20), round(sum(b for _,b in v)/len(v))) for k,v in sorted(cat.items())})
