"""A fake backend over CUDA's real space, candidates and model (no GPU), for
tools/profile_cluster_coordinator.py: kernels compute the product with numpy and "time" at
the model's prediction."""
import numpy as np
from shadertune.backends.base import Backend, DeviceInfo, Kernel
from shadertune.backends.cuda import CUDABackend
from shadertune.core.config import Config


class CudaSpaceKernel(Kernel):
    def __init__(self, backend, problem, config):
        self.backend, self.problem, self.config = backend, problem, config
        self.ms = backend.predict_ms(problem, [config])[0]

    def run(self, A, B, C=None, *, alpha=1.0, beta=0.0):
        return (A.astype(np.float64) @ B.astype(np.float64)).astype(self.problem.dtype)

    def time(self, repeats=10, warmup=2, **kw):
        return [self.ms] * repeats

    def release(self):
        pass


class CudaSpace(Backend):
    name = "cudafake"
    default_strategy = "model"

    def __init__(self, device_index: int = 0):
        self.cuda = CUDABackend()

    def device(self):
        return DeviceInfo("cudafake", "shadertune", "fake H100", "1.0", dict(self.cuda.limits()))

    def space(self, problem):
        return self.cuda.space(problem)

    def default_config(self, problem):
        return self.cuda.default_config(problem)

    def candidates(self, problem, n=24):
        return self.cuda.candidates(problem, n)

    def predict_ms(self, problem, configs):
        return self.cuda.predict_ms(problem, configs)

    def host_predictor(self):
        return self.cuda.host_predictor()

    def template_hash(self):
        return "cudafake-1"

    def source(self, problem, config):
        return "// " + Config(config).key

    def build(self, problem, config):
        return CudaSpaceKernel(self, problem, Config(config))
