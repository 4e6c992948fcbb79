"""`memory-plugin-vector export-onnx`: export the configured model to ONNX, now.

The onnx and onnx-int8 runtimes (MEMORY_PLUGIN_EMBEDDING_BACKEND) run the model's
ONNX export (plugin/embedding/onnx_model.py). This writes it where the server looks
for it (`onnx_dir`: MEMORY_PLUGIN_ONNX_DIR, else the model's own onnx/ directory),
keeping the files already there; it needs torch and nothing from the network.
scripts/install and the image's build run it, so the server does not export at its
first start.
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
