# Per-request view of a multi-turn load row (mockworker --request-log): for every measured
# request, each engine's prefills awaiting at its arrival, and how long until they end.
import json, sys, collections, bisect, os
SCALE=float(os.environ.get('SCALE','2'))
NW=8
def q(xs,p):
    xs=sorted(xs); return xs[max(0,int(p*len(xs))-1)] if xs else 0
def load(path):
    reqs=[]
    for line in open(path):
        r=json.loads(line)
        if r.get('ev')!='req': continue
        r['t1']=r['arr_us']+r['ttft_ms']*1000/SCALE
        reqs.append(r)
    reqs.sort(key=lambda r:r['arr_us'])
    return reqs
def states(reqs):
    byw=collections.defaultdict(list)
    for r in reqs: byw[r['w']].append(r)
    arrs={w:[x['arr_us'] for x in rs] for w,rs in byw.items()}
    def state(w,t,me):
        rs=byw.get(w,[]); i=bisect.bisect_left(arrs.get(w,[]),t)
        n=0;e=t;tok=0
        for x in rs[max(0,i-80):i+1]:
            if x['arr_us']<=t<x['t1'] and x is not me and x['arr_us']<=me['arr_us']:
                if x['arr_us']==t and x is not me: continue
                n+=1; e=max(e,x['t1']); tok+=x['prompt']-x['cached']
        return n,(e-t)/1000*SCALE,tok
    return state
def analyse(path, top=15, verbose=True):
    reqs=load(path); end=reqs[-1]['arr_us']; t0=end-10e6
    win=[r for r in reqs if r['arr_us']>=t0]
    state=states(reqs)
    p99=q([r['ttft_ms'] for r in win],.99)
    stats=collections.Counter(); regs=[]; freeBusy=[]
    rows=[]
    for r in win:
        st=[state(w,r['arr_us'],r) for w in range(NW)]
        mine=st[r['w']]; m=min(s[1] for s in st); mn=min(s[0] for s in st)
        r['st']=st; r['reg']=mine[1]-m
        regs.append(mine[1]-m)
        k=('allbusy' if mn>0 else 'free')
        stats[k]+=1
        if mn==0 and mine[0]>0: stats['free-but-sent-busy']+=1; freeBusy.append(r['ttft_ms'])
        stats['aw%d'%min(mine[0],3)]+=1
    hit=sum(r['cached'] for r in win)/sum(r['prompt'] for r in win)
    name=os.path.basename(path)[:-11]
    print('%-34s n %d p99 %.0f p50 %.0f hit %.3f regret mean %.1f p99 %.1f | %s | sent-busy-while-free ttft mean %.0f'%(name,len(win),p99,q([r['ttft_ms'] for r in win],.5),hit,
        sum(regs)/len(regs),q(regs,.99),' '.join('%s=%d'%kv for kv in sorted(stats.items())), sum(freeBusy)/max(1,len(freeBusy))))
    if verbose:
        ts=sorted(win,key=lambda r:-r['ttft_ms'])[:top]
        for r in sorted(ts,key=lambda r:r['arr_us']):
            print('   t %6.3f w%d ttft %4.0f prompt %4d cached %4d aw %d awtok %5d run %2d busy %5.1f reg %5.1f | aw/w %s | end/w %s'%((r['arr_us']-t0)/1e6,r['w'],r['ttft_ms'],r['prompt'],r['cached'],r['aw'],r['aw_tok'],r['run'],r['busy_ms'],r['reg'],
                ''.join(str(min(s[0],9)) for s in r['st']), ' '.join('%3.0f'%s[1] for s in r['st'])))
    return win,t0
if __name__=='__main__':
    for p in sys.argv[1:]: analyse(p)
