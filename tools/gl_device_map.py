"""Which GPU each EGL device index drives, measured: a GL worker of the cluster opens EGL
device i for GPU i (SHADERTUNE_GPU), which need not be CUDA ordinal i, nor even a
different GPU.  For each index, a child process keeps a compute shader busy on that EGL
device for a few seconds while nvidia-smi samples every GPU's utilization; the GPU that
goes busy is the one the index drives.  Where the driver has EGL_NV_device_cuda, each
device's CUDA ordinal is printed too.

    source .gl/prelude.sh; python3 tools/gl_device_map.py [--seconds 3] [--out FILE.json]
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LOAD = r"""
import sys, time
from shadertune.backends.gl.platform.context import create_egl_context
ctx = create_egl_context(int(sys.argv[1]))
cs = ctx.compute_shader('''#version 430
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer B { float x[]; };
void main() {
    float v = x[gl_GlobalInvocationID.x];
    for (int i = 0; i < 20000; i++) v = v * 1.000001 + 0.5;
    x[gl_GlobalInvocationID.x] = v;
}''')
buf = ctx.buffer(reserve=4 * 256 * 4096)
buf.bind_to_storage_buffer(0)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    cs.run(4096)
    ctx.finish()
print(ctx.info["GL_RENDERER"], flush=True)
"""


def egl_cuda_ordinals() -> list:
    """EGL_CUDA_DEVICE_NV of each EGL device (None where the driver does not say), through
    the EGL entry points the GL backend loads (egl_compat._Egl)."""
    import ctypes
    from shadertune.backends.gl.platform.egl_compat import _MAX_DEVICES, _Egl
    try:
        egl = _Egl()
    except OSError:
        return []
    devices, n = (ctypes.c_void_p * _MAX_DEVICES)(), ctypes.c_int()
    if not egl.query_devices(_MAX_DEVICES, devices, ctypes.byref(n)):
        return []
    q_attrib = egl.get_proc(b"eglQueryDeviceAttribEXT")
    if not q_attrib:
        return [None] * n.value
    q_attrib = ctypes.CFUNCTYPE(ctypes.c_uint, ctypes.c_void_p, ctypes.c_int,
                                ctypes.POINTER(ctypes.c_ssize_t))(q_attrib)
    out = []
    for i in range(n.value):
        value = ctypes.c_ssize_t(-1)
        ok = q_attrib(devices[i], 0x323A, ctypes.byref(value))   # EGL_CUDA_DEVICE_NV
        out.append(int(value.value) if ok else None)
    return out


def sample(seconds: float) -> dict:
    """Mean utilization.gpu of each GPU index over `seconds`."""
    p = subprocess.Popen(["nvidia-smi", "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits",
                          "-lms", "200"], stdout=subprocess.PIPE, text=True)
    time.sleep(seconds)
    p.terminate()
    out, _ = p.communicate(timeout=10)
    sums: dict = {}
    for line in out.splitlines():
        try:
            index, util = (int(t) for t in line.split(","))
        except ValueError:
            continue
        sums.setdefault(index, []).append(util)
    return {i: round(sum(v) / len(v), 1) for i, v in sums.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--out")
    args = ap.parse_args()
    gpus = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.count("GPU ")
    ordinals = egl_cuda_ordinals()
    rows = []
    for index in range(gpus):
        load = subprocess.Popen([sys.executable, "-c", LOAD, str(index), str(args.seconds + 1.5)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)                 # its context made, its loop running
        util = sample(args.seconds)
        out, err = load.communicate(timeout=60)
        busy = max(util, key=util.get) if util else None
        rows.append({"egl_index": index, "cuda_ordinal": ordinals[index] if index < len(ordinals) else None,
                     "busiest_gpu": busy, "utilization": util, "renderer": out.strip(),
                     "error": err.strip().splitlines()[-1] if load.returncode else None})
        print(json.dumps(rows[-1]), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"egl_cuda_ordinals": ordinals, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
