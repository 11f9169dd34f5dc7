"""`python -m shadowkernel.kernel -f CONNECTION_FILE`: what the kernelspec starts."""

from ipykernel.kernelapp import IPKernelApp

from .kernel import ShadowKernel

if __name__ == "__main__":
    IPKernelApp.launch_instance(kernel_class=ShadowKernel)
