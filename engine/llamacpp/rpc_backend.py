"""Past one machine: llama.cpp's RPC backend (ggml-rpc) for a target split over hosts.

A *worker* (`tandem worker`) serves its host's devices over TCP with llama.cpp's own RPC
server; the main host adds each endpoint and places the target's layers on local and
remote devices in proportion to their free memory. The draft always stays local, so a
speculative step pays the network once per target pass, not once per token.

llama.cpp's RPC client aborts the process when a worker cannot be reached, so every
endpoint is first checked here in Python (`probe`: connect with a timeout, the protocol's
HELLO, device count and free memory) and any problem becomes one clear `RpcError`. A
worker lost mid-generation cannot be recovered in-process (llama.cpp has no error path
there): the CLI and the app therefore run a split target in a child process
(engine/serving/remote_engine.py), where the fatal hook reports the loss to the parent. In-process
(`Engine(path, rpc=...)`), the default hook names the lost endpoint in one line and exits
with code 2 instead of a core dump.

The RPC protocol has no authentication and no encryption: loopback by default, and an SSH
tunnel (docs/rpc.md) for other hosts.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..errors import TandemError

# The protocol spoken by the ggml-rpc bundled with llama-cpp-python 0.3.36
# (vendor/llama.cpp/ggml/include/ggml-rpc.h). Workers run the same bundled ggml, so
# they match by construction; a foreign rpc-server of another version is refused.
PROTO = (7, 0, 0)
DEFAULT_PORT = 50052
CONN_CAPS_SIZE = 24  # rpc_msg_hello_req: transport capabilities; zeros = plain TCP
CMD_GET_DEVICE_MEMORY, CMD_HELLO, CMD_DEVICE_COUNT = 11, 14, 15
GB = 1e9
SECURITY_WARNING = (
    "warning: the RPC protocol has no authentication or encryption: anyone who can reach "
    "{endpoint} can use this machine's devices and read what they compute. Use it only on a "
    "trusted network, or bind to 127.0.0.1 and reach it through an SSH tunnel (see docs/rpc.md)."
)


class RpcError(TandemError):
    """An RPC endpoint is malformed, unreachable, busy, of another version, or was lost."""


# -- endpoints -------------------------------------------------------------------------------
def parse_endpoint(value: str) -> str:
    """`HOST:PORT` checked the way llama.cpp parses it (the first ':' splits; no IPv6)."""
    v = value.strip()
    host, sep, port = v.partition(":")
    if not sep or not host or not port:
        raise RpcError(f"RPC endpoint {value!r}: expected HOST:PORT, for example 127.0.0.1:{DEFAULT_PORT}")
    if ":" in port or host.startswith("["):
        raise RpcError(f"RPC endpoint {value!r}: IPv6 addresses are not supported by llama.cpp's RPC; "
                       "use an IPv4 address or a host name")
    try:
        n = int(port)
    except ValueError:
        raise RpcError(f"RPC endpoint {value!r}: port {port!r} is not a number") from None
    if not 0 < n < 65536:
        raise RpcError(f"RPC endpoint {value!r}: port {n} is outside 1..65535")
    return f"{host}:{n}"


def parse_endpoints(value: str | Sequence[str]) -> list[str]:
    """`HOST:PORT[,HOST:PORT...]` (or a list of them) -> unique endpoints, in order."""
    items = value.split(",") if isinstance(value, str) else [x for v in value for x in str(v).split(",")]
    out: list[str] = []
    for item in items:
        if item.strip():
            ep = parse_endpoint(item)
            if ep not in out:
                out.append(ep)
    if not out:
        raise RpcError("no RPC endpoint given: expected HOST:PORT[,HOST:PORT...]")
    return out


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# -- probing a worker without llama.cpp (which would abort on failure) ----------------------
@dataclass
class RemoteDevice:
    index: int
    free: int
    total: int


@dataclass
class WorkerInfo:
    endpoint: str
    version: tuple[int, int, int]
    devices: list[RemoteDevice]
    rtt_ms: float  # one request/response round trip (device count), connection excluded

    @property
    def free(self) -> int:
        return sum(d.free for d in self.devices)

    def describe(self) -> str:
        devs = ", ".join(f"device {d.index}: {d.free / GB:.1f} of {d.total / GB:.1f} GB free" for d in self.devices)
        return f"{self.endpoint}: RPC {'.'.join(map(str, self.version))}, {devs}, round trip {self.rtt_ms:.2f} ms"


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionResetError("connection closed")
        buf += chunk
    return bytes(buf)


def _request(sock: socket.socket, cmd: int, payload: bytes, reply_size: int) -> bytes:
    sock.sendall(struct.pack("<BQ", cmd, len(payload)) + payload)
    size = struct.unpack("<Q", _recv_exact(sock, 8))[0]
    if size != reply_size:
        raise ValueError(f"reply of {size} bytes to command {cmd}, expected {reply_size}")
    return _recv_exact(sock, size)


def probe(endpoint: str, timeout: float = 3.0) -> WorkerInfo:
    """Handshake with a worker: protocol version, devices, free memory, round trip.

    A worker serves one client at a time, so a worker in use by another Tandem answers
    nothing: that is reported as busy after `timeout` seconds."""
    ep = parse_endpoint(endpoint)
    host, _, port = ep.partition(":")
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout)
    except socket.timeout:
        raise RpcError(f"RPC worker {ep}: no answer within {timeout:g} s (host down or port filtered?)") from None
    except ConnectionRefusedError:
        raise RpcError(f"RPC worker {ep}: connection refused (is `tandem worker --port {port}` running there?)") from None
    except OSError as e:
        raise RpcError(f"RPC worker {ep}: cannot connect ({e.strerror or e})") from None
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            rsp = _request(sock, CMD_HELLO, bytes(CONN_CAPS_SIZE), 4 + CONN_CAPS_SIZE)
        except (ConnectionError, ValueError):
            raise RpcError(f"RPC worker {ep}: the handshake failed — not a llama.cpp RPC server of protocol "
                           f"{PROTO[0]}.x (run `tandem worker` of the same Tandem version there)") from None
        version = (rsp[0], rsp[1], rsp[2])
        if version[0] != PROTO[0] or version[1] > PROTO[1]:
            raise RpcError(f"RPC worker {ep}: speaks RPC protocol {'.'.join(map(str, version))}, this build "
                           f"speaks {'.'.join(map(str, PROTO))}: run `tandem worker` of the same Tandem version there")
        t0 = time.perf_counter()
        count = struct.unpack("<I", _request(sock, CMD_DEVICE_COUNT, b"", 4))[0]
        rtt = (time.perf_counter() - t0) * 1e3
        devices = []
        for i in range(count):
            free, total = struct.unpack("<QQ", _request(sock, CMD_GET_DEVICE_MEMORY, struct.pack("<I", i), 16))
            devices.append(RemoteDevice(i, free, total))
        if not devices:
            raise RpcError(f"RPC worker {ep}: it exposes no devices")
        return WorkerInfo(ep, version, devices, rtt)
    except socket.timeout:
        raise RpcError(f"RPC worker {ep}: connected, but no answer within {timeout:g} s "
                       "(busy serving another client, or not an RPC worker)") from None
    except OSError as e:
        raise RpcError(f"RPC worker {ep}: connection lost during the handshake ({e.strerror or e})") from None
    finally:
        sock.close()


# -- placing the target's layers --------------------------------------------------------------
@dataclass
class Placement:
    """Where the target's layers go: llama.cpp's `devices`, `tensor_split`, `n_gpu_layers`."""

    devices: list[int]
    tensor_split: list[float]
    n_gpu_layers: int
    shares: list[tuple[str, float]] = field(default_factory=list)  # (who, fraction of layers)

    def model_kwargs(self) -> dict:
        return {"devices": self.devices, "tensor_split": self.tensor_split, "n_gpu_layers": self.n_gpu_layers}

    def describe(self) -> str:
        return ", ".join(f"{who} {frac:.0%}" for who, frac in self.shares)


def plan_split(
    n_layer: int,
    local: Sequence[tuple[str, int, int]],
    remote: Sequence[tuple[str, int, int]],
    cpu_free: int,
    weights: Sequence[float] | None = None,
) -> Placement:
    """Split n_layer + 1 units (the repeating layers and the output layer) over local
    offload devices and remote devices in proportion to free memory (or `weights`).

    `local`/`remote`: (label, device handle, free bytes). Without a local GPU the local
    CPU takes the first layers (llama.cpp puts layers below n_gpu_layers on the CPU);
    `weights` then has one entry for the CPU followed by one per remote device;
    with local GPUs, one per local GPU then one per remote device."""
    units = n_layer + 1
    parties = ([] if local else [("local CPU", 0, cpu_free)]) + list(local) + list(remote)
    if weights is not None:
        if len(weights) != len(parties):
            names = ", ".join(p[0] for p in parties)
            raise RpcError(f"tensor split has {len(weights)} weights, expected {len(parties)} ({names})")
        if any(w < 0 for w in weights) or sum(weights) <= 0:
            raise RpcError("tensor split weights must be >= 0 and not all 0")
        w = [float(x) for x in weights]
    else:
        w = [float(max(p[2], 1)) for p in parties]
    total = sum(w)
    if local:
        cpu_units = 0
        dev_w = w
    else:
        cpu_units = int(round(units * w[0] / total))
        dev_w = w[1:]
        if sum(dev_w) <= 0:
            cpu_units = units
    n_gpu = units - cpu_units
    devs = [p[1] for p in parties if p[1]]
    shares = []
    if not local:
        shares.append(("local CPU", cpu_units / units))
    dsum = sum(dev_w) or 1.0
    for p, x in zip([q for q in parties if q[1]], dev_w):
        shares.append((p[0], n_gpu / units * x / dsum))
    return Placement(devs, dev_w, n_gpu, shares)


# -- connecting ------------------------------------------------------------------------------
_active: list[str] = []
_active_lock = threading.Lock()


def abort_reason(message: str) -> str:
    """ggml's abort text without its source location: "ggml-rpc.cpp:569: Remote RPC server
    crashed or returned malformed response" -> "Remote RPC server crashed or ..."."""
    first = message.strip().splitlines()[0] if message and message.strip() else "no reply"
    return re.sub(r"^\S+:\d+:\s*", "", first) or first


def _lost_worker_exit(message: str) -> None:
    """The default fatal hook: name the lost worker in one line, exit 2, no core dump."""
    with _active_lock:
        endpoints = list(_active)
    lost = []
    for ep in endpoints:
        try:
            probe(ep, timeout=0.5)
        except RpcError as e:
            if "refused" in str(e) or "cannot connect" in str(e) or "lost" in str(e):
                lost.append(ep)
    if "RPC" in message or lost:
        who = ", ".join(lost) if lost else " or ".join(endpoints) or "an RPC worker"
        line = (f"tandem: error: RPC worker {who} was lost mid-generation ({abort_reason(message)}); "
                "restart the worker, or load the model without --rpc")
    else:
        line = f"tandem: error: llama.cpp stopped: {message}"
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001 - the process ends either way
        pass
    os.write(2, (line + "\n").encode("utf-8", errors="replace"))
    os._exit(2)


@dataclass
class Cluster:
    """Workers added to llama.cpp's RPC client, and how a target is placed on them."""

    workers: list[WorkerInfo]
    devices: dict[str, list[int]]  # endpoint -> ggml device handles
    weights: list[float] | None = None

    @property
    def endpoints(self) -> list[str]:
        return [w.endpoint for w in self.workers]

    @property
    def hosts(self) -> list[str]:
        return [w.endpoint.partition(":")[0] for w in self.workers]

    def placement(self, n_layer: int) -> Placement:
        from . import ggml_devices

        local = []
        cpu_free = 0
        for dev in ggml_devices.local_devices():
            name, _desc, kind, free, _total = ggml_devices.device_info(dev)
            if kind in ("GPU", "iGPU"):
                local.append((f"local {name}", dev, free))
            elif kind == "CPU":
                cpu_free = free
        if not cpu_free:
            import psutil

            cpu_free = psutil.virtual_memory().available
        remote = []
        for w in self.workers:
            for d, h in zip(w.devices, self.devices[w.endpoint]):
                label = w.endpoint if len(w.devices) == 1 else f"{w.endpoint}#{d.index}"
                remote.append((label, h, d.free))
        return plan_split(n_layer, local, remote, cpu_free, self.weights)

    def model_kwargs(self, header) -> dict:
        """llama_model_params for a target with this GGUF header, split over the cluster."""
        arch = header.architecture
        n_layer = int(header.get(f"{arch}.block_count") or 0)
        if n_layer <= 0:
            raise RpcError(f"cannot split this model over RPC workers: no {arch}.block_count in its header")
        return self.placement(n_layer).model_kwargs()


def connect(
    endpoints: str | Sequence[str],
    *,
    timeout: float = 3.0,
    weights: Sequence[float] | None = None,
    fatal_hook: Callable[[str], None] | None = _lost_worker_exit,
) -> Cluster:
    """Check every endpoint (one `RpcError` naming the first bad one), then add them to
    llama.cpp's RPC client. `fatal_hook` runs if a worker is lost later (see module doc)."""
    from . import ggml_devices

    if not ggml_devices.supports_rpc():
        raise RpcError("this llama.cpp build has no RPC backend: rebuild it with packaging/install_llama_cpp.sh "
                       "(it adds -DGGML_RPC=ON)")
    eps = parse_endpoints(endpoints)
    workers = [probe(ep, timeout) for ep in eps]
    if fatal_hook is not None:
        ggml_devices.set_fatal_hook(fatal_hook)
    with _active_lock:
        for ep in eps:
            if ep not in _active:
                _active.append(ep)
    devices = {}
    for w in workers:
        handles = ggml_devices.rpc_add_server(w.endpoint)
        if len(handles) != len(w.devices):
            raise RpcError(f"RPC worker {w.endpoint}: reported {len(w.devices)} devices, llama.cpp sees {len(handles)}")
        devices[w.endpoint] = handles
    return Cluster(workers, devices, list(weights) if weights is not None else None)


# -- the worker side ----------------------------------------------------------------------------
def pick_devices(names: Sequence[str] | None = None) -> list[tuple[int, str, str, str, int, int]]:
    """This host's devices to serve: the named ones, else every GPU, else the CPU
    (what llama.cpp's rpc-server does). Rows: (handle, name, description, kind, free, total)."""
    from . import ggml_devices

    rows = [(h, *ggml_devices.device_info(h)) for h in ggml_devices.local_devices()]
    rows = [r for r in rows if not r[1].startswith("RPC")]
    if names:
        wanted = {n.strip().lower() for n in names if n.strip()}
        chosen = [r for r in rows if r[1].lower() in wanted]
        missing = wanted - {r[1].lower() for r in chosen}
        if missing:
            have = ", ".join(r[1] for r in rows) or "none"
            raise RpcError(f"no device named {', '.join(sorted(missing))} on this host (devices: {have})")
        return chosen
    gpus = [r for r in rows if r[3] in ("GPU", "iGPU")]
    return gpus or [r for r in rows if r[3] == "CPU"][:1]


def check_port_free(host: str, port: int) -> None:
    """Bind once in Python so a taken port is one clear line, not a C message."""
    try:
        infos = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise RpcError(f"cannot listen on {host}:{port}: unknown host ({e.strerror})") from None
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(infos[0][4])
    except OSError as e:
        raise RpcError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    finally:
        s.close()


def serve_forever(endpoint: str, devices: Sequence[int], *, cache_dir: str | None, n_threads: int | None,
                  ready: Callable[[], None] | None = None) -> None:
    """Run llama.cpp's RPC server on a thread until Ctrl+C / SIGTERM (or until it fails)."""
    from . import ggml_devices

    failed = threading.Event()

    def run() -> None:
        ggml_devices.rpc_start_server(endpoint, devices, cache_dir=cache_dir, n_threads=n_threads)
        failed.set()  # start_server only returns when it could not listen

    t = threading.Thread(target=run, name="rpc-server", daemon=True)
    t.start()
    host, _, port = endpoint.partition(":")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not failed.is_set():
        try:
            socket.create_connection((host if host != "0.0.0.0" else "127.0.0.1", int(port)), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.05)
    if failed.is_set():
        raise RpcError(f"llama.cpp's RPC server could not listen on {endpoint}")
    if ready is not None:
        ready()
    while not failed.wait(0.5):
        pass
    raise RpcError(f"llama.cpp's RPC server on {endpoint} stopped")
