"""How long a dead replica's shards take to be taken over.

Usage (from the bench directory, PostgreSQL at 127.0.0.1:5432, user
postgres, trust auth): python3 failover.py /path/to/vigil

Starts two `vigil serve` replicas on a fresh database (failprobe) at the
default lease and renewal, waits until each holds 32 of the 64 shards and
3 s more, kills one with SIGKILL, and polls the other's GET /v1/daemon
every 50 ms until it holds all 64; prints the time that took. See
docs/BENCHMARKS.md, session 28.
"""
import subprocess, time, json, os, sys, urllib.request, shutil, signal
binary=sys.argv[1]; db='failprobe'
subprocess.run(['psql','-h','127.0.0.1','-U','postgres','-qc',f'DROP DATABASE IF EXISTS {db}','-c',f'CREATE DATABASE {db}','test'],check=True,capture_output=True)
url=f'postgres://postgres@127.0.0.1:5432/{db}?sslmode=disable'
base='/tmp/fo'; shutil.rmtree(base,ignore_errors=True)
procs={}
def start(name,port):
    d=f'{base}/{name}'; os.makedirs(d+'/data',exist_ok=True); os.makedirs(d+'/home',exist_ok=True)
    if name!='a':
        for f in ['webhook.secret','link.key']: shutil.copy(f'{base}/a/data/{f}', f'{d}/data/{f}')
    env=dict(os.environ,HOME=d+'/home')
    p=subprocess.Popen([binary,'serve','--store',url,'--data-dir',d+'/data','--listen',f'127.0.0.1:{port}','--replica','r'+name,'--roots',base],env=env,stdout=open(d+'.log','w'),stderr=subprocess.STDOUT,start_new_session=True)
    procs[name]=(p,port,d)
def info(name):
    p,port,d=procs[name]
    tok=open(d+'/data/admin.token').read().strip()
    r=urllib.request.Request(f'http://127.0.0.1:{port}/v1/daemon',headers={'Authorization':'Bearer '+tok})
    return json.load(urllib.request.urlopen(r,timeout=2))
start('a',17501)
for _ in range(100):
    if os.path.exists(f'{base}/a/data/link.key') and os.path.exists(f'{base}/a/data/admin.token'): break
    time.sleep(0.1)
time.sleep(1)
start('b',17502)
deadline=time.time()+60
while time.time()<deadline:
    try:
        ia,ib=info('a'),info('b')
        if len(ia.get('shards',[]))==32 and len(ib.get('shards',[]))==32: break
    except Exception as e: pass
    time.sleep(0.2)
time.sleep(3)
t0=time.time()
os.killpg(procs['a'][0].pid, signal.SIGKILL)
while True:
    try:
        if len(info('b').get('shards',[]))==64: break
    except Exception: pass
    time.sleep(0.05)
print(f'{binary}: b held all 64 shards {time.time()-t0:.2f} s after a was killed')
os.killpg(procs['b'][0].pid, signal.SIGTERM); time.sleep(1)
subprocess.run(['psql','-h','127.0.0.1','-U','postgres','-qc',f'DROP DATABASE IF EXISTS {db} WITH (FORCE)','test'],capture_output=True)
