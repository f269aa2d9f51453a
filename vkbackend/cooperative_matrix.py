"""Cooperative matrices (VK_KHR_cooperative_matrix): the matrix products a device computes across a subgroup.

The device lists them with ``vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR``; :class:`CooperativeMatrixShape` is
one entry of that list, with the component types named as :class:`vkbackend.DType` names, and
``DeviceInfo.cooperative_matrix_shapes`` holds them (empty where the device lacks the extension or its feature).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._ffi import vulkan
from .errors import ErrorStatus
from .structs import listed

__all__ = ["CooperativeMatrixShape", "query_shapes", "shape_from_properties"]

# VkComponentTypeKHR -> the DType name of that type; types vkbackend has no DType for are "vk_component_type_<value>"
_COMPONENT_TYPES = {
    "VK_COMPONENT_TYPE_FLOAT16_KHR": "float16",
    "VK_COMPONENT_TYPE_FLOAT32_KHR": "float32",
    "VK_COMPONENT_TYPE_FLOAT64_KHR": "float64",
    "VK_COMPONENT_TYPE_BFLOAT16_KHR": "bfloat16",
    "VK_COMPONENT_TYPE_SINT8_KHR": "int8",
    "VK_COMPONENT_TYPE_SINT16_KHR": "int16",
    "VK_COMPONENT_TYPE_SINT32_KHR": "int32",
    "VK_COMPONENT_TYPE_SINT64_KHR": "int64",
    "VK_COMPONENT_TYPE_UINT8_KHR": "uint8",
    "VK_COMPONENT_TYPE_UINT16_KHR": "uint16",
    "VK_COMPONENT_TYPE_UINT32_KHR": "uint32",
    "VK_COMPONENT_TYPE_UINT64_KHR": "uint64",
}
_SCOPES = {
    "VK_SCOPE_DEVICE_KHR": "device",
    "VK_SCOPE_WORKGROUP_KHR": "workgroup",
    "VK_SCOPE_SUBGROUP_KHR": "subgroup",
    "VK_SCOPE_QUEUE_FAMILY_KHR": "queue_family",
}


@dataclass(frozen=True)
class CooperativeMatrixShape:
    """One product a device's cooperative matrices compute: ``Result (m x n) = A (m x k) * B (k x n) + C (m x n)``.

    ``a_type``, ``b_type``, ``c_type`` and ``result_type`` are DType names (``"float16"``, ``"bfloat16"``,
    ``"float32"``, ``"int8"``...; ``"vk_component_type_<n>"`` for a type vkbackend has no DType for), ``scope`` the
    invocations that cooperate on one matrix (``"subgroup"`` on every driver we know of; ``"workgroup"``,
    ``"device"``, ``"queue_family"``), and ``saturating_accumulation`` whether integer sums saturate."""

    m: int
    n: int
    k: int
    a_type: str
    b_type: str
    c_type: str
    result_type: str
    saturating_accumulation: bool
    scope: str


def _names(table: dict[str, str]) -> dict[int, str]:
    lib = vulkan()[1]
    return {getattr(lib, constant): name for constant, name in table.items()}


def shape_from_properties(p: Any) -> CooperativeMatrixShape:
    """The record of one ``VkCooperativeMatrixPropertiesKHR`` (a cdata struct, or anything with its fields)."""
    types, scopes = _names(_COMPONENT_TYPES), _names(_SCOPES)

    def component(value: int) -> str:
        return types.get(value, f"vk_component_type_{value}")

    return CooperativeMatrixShape(
        m=int(p.MSize),
        n=int(p.NSize),
        k=int(p.KSize),
        a_type=component(p.AType),
        b_type=component(p.BType),
        c_type=component(p.CType),
        result_type=component(p.ResultType),
        saturating_accumulation=bool(p.saturatingAccumulation),
        scope=scopes.get(p.scope, f"vk_scope_{p.scope}"),
    )


def query_shapes(physical_device: Any) -> tuple[CooperativeMatrixShape, ...]:
    """Every shape ``physical_device`` (a VkPhysicalDevice with VK_KHR_cooperative_matrix) lists, in its order."""
    _, lib = vulkan()
    return tuple(
        listed(
            lib.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR,
            "VkCooperativeMatrixPropertiesKHR",
            shape_from_properties,
            physical_device,
            status=ErrorStatus.Initialization,
        )
    )
