"""A matmul call's plumbing below the backends: checking a call into a MatmulCall
(inputs), running it on host arrays (host), and the device arrays a call may hold
(device_arrays)."""
