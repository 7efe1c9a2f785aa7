# Pair two load rows of one run request by request: every row has the same arrival schedule
# (loadgen seed 1), so the k-th measured arrival is the same scheduled instant in both.
import json, sys, os
sys.path.insert(0,'/tmp/p2mt')
from an import load, states, q, SCALE, NW
def measured(path):
    js=json.load(open(path[:-len('.mock.jsonl')]+'.json'))
    reqs=load(path)
    n=js['completed']+js['failed']
    w=js['config']['warmup']
    m=reqs[w:]
    return reqs, m, js
def row(path):
    reqs,m,js=measured(path)
    st=states(reqs)
    t0=m[0]['arr_us']
    for r in m:
        r['st']=[st(w,r['arr_us'],r) for w in range(NW)]
        r['t']=(r['arr_us']-t0)/1e6*SCALE  # model s since the window opened
    return m,js
if __name__=='__main__':
    a,ja=row(sys.argv[1]); b,jb=row(sys.argv[2])
    print('A',os.path.basename(sys.argv[1]),len(a),'loadgen p99 %.0f'%(ja['ttft_ms']['p99']*SCALE),'engine p99 %.0f'%q([r['ttft_ms'] for r in a],.99))
    print('B',os.path.basename(sys.argv[2]),len(b),'loadgen p99 %.0f'%(jb['ttft_ms']['p99']*SCALE),'engine p99 %.0f'%q([r['ttft_ms'] for r in b],.99))
    n=min(len(a),len(b))
    drift=[(b[k]['arr_us']-b[0]['arr_us'])-(a[k]['arr_us']-a[0]['arr_us']) for k in range(n)]
    print('schedule drift between rows (wall ms): max abs %.1f'%(max(abs(d) for d in drift)/1000))
    top=int(os.environ.get('TOP','15'))
    idx=sorted(range(n),key=lambda k:-b[k]['ttft_ms'])[:top]
    for k in sorted(idx):
        x,y=a[k],b[k]
        print('k %4d t %6.3f | A w%d ttft %4.0f p%4d c%4d aw %s | B w%d ttft %4.0f p%4d c%4d aw %s'%(k,y['t'],x['w'],x['ttft_ms'],x['prompt'],x['cached'],''.join(str(min(s[0],9)) for s in x['st']),
              y['w'],y['ttft_ms'],y['prompt'],y['cached'],''.join(str(min(s[0],9)) for s in y['st'])))
