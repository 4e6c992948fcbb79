"""`memory-plugin-vector export-onnx`: export the configured model to ONNX, before serving.

It writes the files the onnx runtimes run where the server looks for them, so that the server
need not export them at its first start (docs/embedding.md).
"""

from __future__ import annotations

from plugin.commands import Print
from plugin.embedding.encoders import offline
from plugin.embedding.encoders import onnx_dir
from plugin.embedding.model_files import model_name
from plugin.embedding.model_files import resolve_model_dir
from plugin.settings import Settings


def export_configured(settings: Settings, out: Print) -> int:
    from plugin.embedding.onnx_model import export_onnx

    offline()
    target = onnx_dir(settings)
    export_onnx(resolve_model_dir(settings.embedding_model), target)
    out(f"export-onnx: the ONNX files of {model_name(settings.embedding_model)} are in {target}")
    return 0
