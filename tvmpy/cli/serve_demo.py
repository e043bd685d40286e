"""``tvmpy serve-demo``: build the web demo's model and serve ``web/`` on localhost.

The model is the digits classifier of relay/testing/digits.py (trained here in seconds on
scikit-learn's bundled data set). :func:`build_demo` writes into ``web/demo/build/`` (ignored by
git; reused while its ``manifest.json`` matches): ``digits.wasm``, one file with both paths (the
WebGPU program, docs/WEB_ARTEFACT.md, with the wasm32 SIMD build as its CPU fallback; only the
wasm32 build when target webgpu does not build, and the manifest says why), ``digits.onnx``,
``samples.json`` (held-out test images, labels) and ``manifest.json``. The page is
``web/demo/index.html``; the JavaScript runtime it uses is ``web/tvmpy.mjs``.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import threading
from pathlib import Path
from typing import Any

from ._common import CliError

WEB = Path(__file__).resolve().parents[2] / "web"
WASM_TARGET = "llvm -mtriple=wasm32-unknown-unknown -mattr=+simd128"
MANIFEST_VERSION = 3
MIME = {".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm",
        ".json": "application/json", ".html": "text/html", ".css": "text/css"}


def web_root() -> Path:
    """The repository's ``web/`` folder (a source checkout; not part of a wheel)."""
    if not (WEB / "tvmpy.mjs").is_file():
        raise CliError(f"no web runtime at {WEB} (serve-demo needs a source checkout of tvmpy)")
    return WEB


def build_demo(out: Path | None = None, force: bool = False, webgpu: bool = True) -> dict:
    """Build the demo's artefacts into ``out`` (default web/demo/build); returns the manifest."""
    import numpy as np

    from .. import relay
    from ..relay.testing import digits

    out = Path(out) if out is not None else web_root() / "demo" / "build"
    manifest_path = out / "manifest.json"
    if manifest_path.is_file() and not force:
        built = json.loads(manifest_path.read_text())
        if built.get("version") == MANIFEST_VERSION and (out / built["file"]).is_file():
            return built
    out.mkdir(parents=True, exist_ok=True)
    try:
        model, accuracy = digits.digits_mlp()
    except ImportError as e:
        raise CliError(str(e)) from None
    shape = {"input": (1, 1, digits.IMAGE, digits.IMAGE)}
    mod, params = relay.frontend.from_onnx(model, shape)
    (out / "digits.onnx").write_bytes(model.SerializeToString())
    wasm_lib = relay.build(mod, target=WASM_TARGET, params=params)
    manifest: dict[str, Any] = {
        "version": MANIFEST_VERSION, "model": "digits MLP 64-32-10 (scikit-learn digits)",
        "accuracy": accuracy, "input": "input", "shape": list(shape["input"]),
        "file": "digits.wasm", "webgpu": False, "webgpu_error": "not built (--no-webgpu)",
    }
    if webgpu:
        try:  # one file: the WebGPU program with the wasm32 SIMD build as its CPU fallback
            relay.build(mod, target="webgpu", params=params).export_library(
                str(out / "digits.wasm"), fallback=wasm_lib)
            manifest["webgpu"], manifest["webgpu_error"] = True, None
        except Exception as e:  # noqa: BLE001 - the page reports it; the wasm path still works
            manifest["webgpu_error"] = f"{type(e).__name__}: {e}"
    if not manifest["webgpu"]:
        wasm_lib.export_library(str(out / "digits.wasm"))
    images, labels = digits.digits_samples(10)
    (out / "samples.json").write_text(json.dumps({
        "images": np.asarray(images).reshape(len(labels), -1).tolist(),
        "labels": np.asarray(labels).tolist()}))
    manifest_path.write_text(json.dumps(manifest, indent=1))
    return manifest


class _Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **MIME}
    build_dir: Path | None = None  # served at /demo/build/ when the build is elsewhere

    def translate_path(self, path: str) -> str:
        prefix = "/demo/build/"
        if self.build_dir is not None and path.startswith(prefix):
            name = path[len(prefix):].split("?", 1)[0].split("#", 1)[0]
            if "/" not in name and name not in ("", ".", ".."):
                return str(self.build_dir / name)
        return super().translate_path(path)

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass


def make_server(host: str = "127.0.0.1", port: int = 0, root: Path | None = None,
                build_dir: Path | None = None) -> http.server.ThreadingHTTPServer:
    """An HTTP server of ``root`` (default web/) on host:port (0: a free port), with
    ``build_dir`` (if given) at /demo/build/; not started."""
    handler_cls = type("Handler", (_Handler,), {"build_dir": build_dir})
    handler = functools.partial(handler_cls, directory=str(root or web_root()))
    return http.server.ThreadingHTTPServer((host, port), handler)


def serve_in_thread(root: Path | None = None) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Start a server of ``root`` on a free localhost port in a daemon thread: (server, base URL)."""
    srv = make_server(root=root)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


def cmd_serve_demo(args: argparse.Namespace) -> int:
    build_dir = Path(args.build_dir) if args.build_dir else None
    manifest = build_demo(build_dir, force=args.rebuild, webgpu=not args.no_webgpu)
    if manifest["webgpu_error"]:
        print(f"serve-demo: no WebGPU build ({manifest['webgpu_error']}); the page runs the wasm "
              "path only")
    try:
        srv = make_server(args.host, args.port, build_dir=build_dir)
    except OSError as e:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {e}") from None
    print(f"serving the tvmpy web demo at http://{args.host}:{srv.server_address[1]}/demo/ "
          "(Ctrl-C stops)", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
    return 0


def add_parser(sub: Any) -> None:
    """Add the ``serve-demo`` command to the ``tvmpy`` parser's subcommands ``sub``."""
    d = sub.add_parser("serve-demo", help="build the web demo's model and serve web/ on localhost")
    d.add_argument("--host", default="127.0.0.1")
    d.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free one)")
    d.add_argument("--rebuild", action="store_true", help="rebuild the model even if built")
    d.add_argument("--no-webgpu", action="store_true", help="build the wasm path only")
    d.add_argument("--build-dir", help="where the model is built (default web/demo/build)")
    d.set_defaults(func=cmd_serve_demo)
