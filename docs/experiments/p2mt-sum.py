import sys, os
sys.path.insert(0,'/tmp/p2mt')
from pair import row
from an import q
d=sys.argv[1]
for r in range(1,5):
    for p in ('round_robin','least_load','power_of_two'):
        m,js=row(os.path.join(d,'multi-turn-load%d-%s.mock.jsonl'%(r,p)))
        ex=0;ex2=0;freeb=0
        for x in m:
            c=[s[0] for s in x['st']]; mine=c[x['w']]
            if mine>min(c): ex+=1
            if mine>=min(c)+2: ex2+=1
            if min(c)==0 and mine>0: freeb+=1
            x['ex']=mine-min(c)
        top=sorted(m,key=lambda x:-x['ttft_ms'])[:12]
        p99=q([x['ttft_ms'] for x in m],.99)
        burst=sum(1 for x in top if 5.6<=x['t']<=6.3)
        print('r%d %-13s loadgen p99 %3.0f engine p99 %3.0f hit %.3f | picks onto more awaiting than the least: %3d (by >=2: %2d), busy while one free %3d | top 12: in the 5.6-6.3 s burst %2d, onto more than the least %2d, mean excess %.1f'%(
            r,p,js['ttft_ms']['p99']*2,p99,sum(x['cached'] for x in m)/sum(x['prompt'] for x in m),ex,ex2,freeb,burst,sum(1 for x in top if x['ex']>0),sum(x['ex'] for x in top)/12))
