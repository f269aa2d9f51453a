"""Device.pipeline_statistics on a device opened with VKBACKEND_PIPELINE_STATISTICS=1 (tests/test_programs.py): what
the driver reports of a program's pipeline, of one compiled in the background (waited for), a failed query, and the
refusal where the device cannot keep them."""

from _reliability import AFFINE
from isolated import affine_scene, report

import vkbackend
from vkbackend import pipelines, testing
from vkbackend.errors import BackendError

result = {}
dev, pool, prog, buf, x = affine_scene()
result["offered"] = "VK_KHR_pipeline_executable_properties" in dev.info.extensions
result["keeps"] = pipelines.keeps_statistics(dev._ctx)


def described(executables) -> list:
    return [
        {
            "name": e["name"],
            "subgroup_size": e["subgroup_size"],
            "statistics": len(e["statistics"]),
            "kinds": sorted({type(v).__name__ for v in e["statistics"].values()}),
        }
        for e in executables
    ]


try:
    result["executables"] = described(dev.pipeline_statistics(prog))
    spirv = bytearray(vkbackend.compile_glsl(AFFINE))
    spirv[8:12] = (0x7E570000 | 7).to_bytes(4, "little")  # another program of the same code
    result["background"] = described(dev.pipeline_statistics(dev.compile(bytes(spirv), background=True)))
except BackendError as error:
    result["error"] = [error.status.name, str(error)]
if result["keeps"]:
    testing.inject("vkGetPipelineExecutableStatisticsKHR", "VK_ERROR_OUT_OF_HOST_MEMORY")
    try:
        dev.pipeline_statistics(prog)
        result["failed_query"] = None
    except BackendError as error:
        result["failed_query"] = [error.status.name, str(error)]
    result["after_failure"] = described(dev.pipeline_statistics(prog))  # nothing left broken
report(result)
