"""An ONNX file's initializers (its weights) as numpy arrays, without the `onnx` package.

The session pool shares one copy of the weights, and the slim image carries protobuf but not
`onnx`, so the few fields of onnx.proto that hold the weights are declared here.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

# onnx.proto's TensorProto.DataType values and their numpy types (little-endian raw_data).
DTYPES = {
    1: np.float32,
    2: np.uint8,
    3: np.int8,
    4: np.uint16,
    5: np.int16,
    6: np.int32,
    7: np.int64,
    9: np.bool_,
    10: np.float16,
    11: np.float64,
    12: np.uint32,
    13: np.uint64,
}
# Where a tensor without raw_data keeps its values: the narrow integer types in int32_data.
_TYPED_FIELDS = {1: "float_data", 7: "int64_data", 11: "double_data"} | dict.fromkeys(
    (2, 3, 4, 5, 6, 9), "int32_data"
)
_EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL: the data is in another file


@cache
def _model_class() -> Any:
    """ModelProto.graph.initializer, with onnx.proto's field numbers and nothing else."""
    from google.protobuf import descriptor_pb2
    from google.protobuf import descriptor_pool
    from google.protobuf import message_factory

    proto = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="memory_plugin_onnx_weights.proto", package="memory_plugin_onnx", syntax="proto2"
    )

    def message(name: str, fields: list[tuple[str, int, int, int, str]]) -> None:
        added = file.message_type.add(name=name)
        for field, number, kind, label, type_name in fields:
            added.field.add(name=field, number=number, type=kind, label=label)
            if type_name:
                added.field[-1].type_name = type_name

    one, many = proto.LABEL_OPTIONAL, proto.LABEL_REPEATED
    message(
        "TensorProto",
        [
            ("dims", 1, proto.TYPE_INT64, many, ""),
            ("data_type", 2, proto.TYPE_INT32, one, ""),
            ("float_data", 4, proto.TYPE_FLOAT, many, ""),
            ("int32_data", 5, proto.TYPE_INT32, many, ""),
            ("int64_data", 7, proto.TYPE_INT64, many, ""),
            ("name", 8, proto.TYPE_STRING, one, ""),
            ("raw_data", 9, proto.TYPE_BYTES, one, ""),
            ("double_data", 10, proto.TYPE_DOUBLE, many, ""),
            ("data_location", 14, proto.TYPE_INT32, one, ""),
        ],
    )
    tensor = ".memory_plugin_onnx.TensorProto"
    message("GraphProto", [("initializer", 5, proto.TYPE_MESSAGE, many, tensor)])
    graph = ".memory_plugin_onnx.GraphProto"
    message("ModelProto", [("graph", 7, proto.TYPE_MESSAGE, one, graph)])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    found = pool.FindMessageTypeByName("memory_plugin_onnx.ModelProto")
    return message_factory.GetMessageClass(found)


def read_initializers(onnx_file: Path) -> list[tuple[str, np.ndarray]] | None:
    """(name, array) for every initializer; None when one is stored in a way not read here."""
    model = _model_class()()
    model.ParseFromString(onnx_file.read_bytes())
    found = []
    for tensor in model.graph.initializer:
        dtype = DTYPES.get(tensor.data_type)
        if dtype is None or tensor.data_location == _EXTERNAL:
            return None
        shape = tuple(tensor.dims)
        array: np.ndarray
        if tensor.HasField("raw_data"):
            array = np.frombuffer(tensor.raw_data, dtype=dtype)
        elif tensor.data_type in _TYPED_FIELDS:
            array = np.array(getattr(tensor, _TYPED_FIELDS[tensor.data_type]), dtype=dtype)
        else:
            return None
        if array.size != int(np.prod(shape, dtype=np.int64)):
            return None
        found.append((tensor.name, array.reshape(shape)))
    return found
