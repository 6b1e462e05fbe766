#!/usr/bin/env python3
"""Run jobs in parallel on a machine with several GPUs, one GPU a job, each under its own
timeout, and pack each job's folder for the device tool (which brings back at most 8 files).

    python3 tools/device_batch.py OUT JOBS.json

JOBS.json: [{"name": "gl", "gpu": 0, "timeout": 540, "cmd": "bash command"}, ...]. A job runs
in the repository root with CUDA_VISIBLE_DEVICES=<gpu> (CUDA_DEVICE_ORDER=PCI_BUS_ID) and
SHADERTUNE_GL_DEVICE set to the EGL index of that GPU (0 where the driver's EGL already
lists only the visible GPU, else <gpu>), JOB=OUT/<name> (a folder for its files) and its
output in JOB/log.txt. At the end every JOB folder becomes OUT/<name>.tgz and
OUT/summary.txt says each job's exit status and seconds.  With "cpus": "slice" a job is held
to its share of the host's cores (taskset: job i of n gets the i-th n-th), so that one job's
compiles do not slow another's timed calls.
"""
import json
import os
import shlex
import subprocess
import sys
import tarfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def egl_devices(env) -> int:
    code = ("import ctypes; from shadertune.backends.gl.platform.egl_compat import _Egl; e=_Egl(); "
            "n=ctypes.c_int(0); e.query_devices(0, None, ctypes.byref(n)); print(n.value)")
    try:
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                             text=True, timeout=60)
        return int(out.stdout.strip().splitlines()[-1])
    except Exception as e:      # noqa: BLE001 - reported, the job still runs
        print(f"device_batch: EGL device count failed: {e}", flush=True)
        return -1


def main(out: str, jobs_file: str) -> int:
    jobs = json.load(open(jobs_file))
    os.makedirs(out, exist_ok=True)
    base = dict(os.environ, PYTHONUNBUFFERED="1", CUDA_DEVICE_ORDER="PCI_BUS_ID")
    probe = dict(base, CUDA_VISIBLE_DEVICES="0")
    seen_one = egl_devices(probe)
    all_ = egl_devices({k: v for k, v in base.items() if k != "CUDA_VISIBLE_DEVICES"})
    print(f"device_batch: EGL devices with CUDA_VISIBLE_DEVICES=0: {seen_one}; without: {all_}", flush=True)
    running = []
    for j in jobs:
        job_dir = os.path.join(out, j["name"])
        os.makedirs(job_dir, exist_ok=True)
        gpu = int(j.get("gpu", 0))
        env = dict(base, CUDA_VISIBLE_DEVICES=str(gpu), JOB=job_dir,
                   SHADERTUNE_GL_DEVICE=str(0 if seen_one == 1 and all_ != 1 else gpu))
        env.update({k: str(v) for k, v in j.get("env", {}).items()})
        log = open(os.path.join(job_dir, "log.txt"), "w")
        # shlex.quote: the job's own shell expands its variables ($f in a loop), not this one
        cmd = f"timeout -k 10 {int(j['timeout'])} bash -c {shlex.quote(j['cmd'])}"
        if j.get("cpus") == "slice":
            cores = sorted(os.sched_getaffinity(0))
            share = max(1, len(cores) // len(jobs))
            mine = cores[jobs.index(j) * share:(jobs.index(j) + 1) * share] or cores
            cmd = f"taskset -c {','.join(map(str, mine))} {cmd}"
        p = subprocess.Popen(cmd, shell=True, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        running.append((j, p, time.time(), log))
        print(f"device_batch: started {j['name']} on GPU {gpu} (GL device {env['SHADERTUNE_GL_DEVICE']})",
              flush=True)
    lines = []
    for j, p, t0, log in running:
        rc = p.wait()
        log.close()
        lines.append(f"{j['name']}: rc={rc} {time.time() - t0:.0f} s")
        print("device_batch: " + lines[-1], flush=True)
        tail = open(os.path.join(out, j["name"], "log.txt"), errors="replace").read()[-1500:]
        print(f"--- {j['name']} (tail)\n{tail}\n---", flush=True)
    for j, *_ in running:
        with tarfile.open(os.path.join(out, f"{j['name']}.tgz"), "w:gz") as tar:
            tar.add(os.path.join(out, j["name"]), arcname=j["name"])
        subprocess.run(["rm", "-rf", os.path.join(out, j["name"])])
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
